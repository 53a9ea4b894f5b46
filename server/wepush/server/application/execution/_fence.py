"""Transactions of the executing side. Every write made while a run executes carries its lease fence.

A database that cannot be used for a while (a restart, a fail-over, a SQLite lock held too long) is not a
reason to give a run up while its lease may still be ours: nobody else can take the run over before the
lease expires, so the executor waits for the database (``LeaseGuard.retrying``) and carries on when it is
back. Only once the lease's expiry has passed does it give up, with ``LeaseExpired``: from then on the
run belongs to the recovery, as if this executor had died.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import datetime
from typing import Protocol, TypeVar

from wepush.server.domain import (
    DatabaseBusy,
    DatabaseUnavailable,
    DomainError,
    LeaseExpired,
    LeaseFence,
    UnitOfWork,
    UnitOfWorkFactory,
)

__all__ = ["LeaseGuard", "Retry", "TransactionScope", "plain_transactions", "retrying"]

T = TypeVar("T")

_log = logging.getLogger("wepush.server.execution")

TransactionScope = Callable[[], AbstractAsyncContextManager[UnitOfWork]]
"""Opens one write transaction; the executor's scope checks the fence first, the Service's does not."""

_ATTEMPTS = 4
_DELAY = 0.1
"""Tries of a transaction after a failure that is no outage (or with no lease to bound the wait), and
the first wait between them (doubling)."""
_OUTAGE_FIRST_DELAY = 0.1
_OUTAGE_MAX_DELAY = 1.0
"""Seconds between tries while the database cannot be used: soon after a blip, then about once a second
per waiting statement, which a database coming back can take."""


class Retry(Protocol):
    """Runs a whole (idempotent) transaction, again after an infrastructure failure: ``retrying`` or
    ``LeaseGuard.retrying``."""

    def __call__(self, operation: Callable[[], Awaitable[T]], /) -> Awaitable[T]: ...


class LeaseGuard:
    """Opens write transactions that first prove the lease is still ours (``leases.check``): a revoked or
    expired lease, or an older epoch, makes the whole transaction fail with ``LeaseExpired``.

    ``expires_at`` is the lease's expiry as this executor last stored it (claim, then each renewal; see
    ``extended``): until then no one else can take the run over, so ``retrying`` waits out a database
    outage until then. ``None`` (not known) retries a few times only, as ``retrying`` does.
    """

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        fence: LeaseFence,
        clock: Callable[[], datetime],
        *,
        expires_at: datetime | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._uow = uow
        self.fence = fence
        self._clock = clock
        self._sleep = sleep
        self.expires_at = expires_at
        self._told = False

    def now(self) -> datetime:
        """The instant a fenced write is checked at (the lease must not have expired by then)."""
        return self._clock()

    def extended(self, expires_at: datetime) -> None:
        """The lease was renewed until ``expires_at`` (as stored)."""
        if self.expires_at is None or expires_at > self.expires_at:
            self.expires_at = expires_at

    async def retrying(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation`` (a whole, idempotent transaction) again while the database is unavailable or
        busy, for as long as the lease may still be ours; then raise ``LeaseExpired``.

        Other domain errors are answers and propagate at once; any other failure is tried a few times,
        as ``retrying`` does. The expiry is read again before each wait: a renewal that succeeds
        meanwhile (the database is back) lets the wait go on.
        """
        if self.expires_at is None:
            return await retrying(operation)
        outages = failures = 0
        while True:
            try:
                return await operation()
            except (DatabaseBusy, DatabaseUnavailable) as exc:
                assert self.expires_at is not None
                left = (self.expires_at - self._clock()).total_seconds()
                if left <= 0:
                    # Anyone may recover the run from now on: this executor must not write to it again.
                    self._outlasted()
                    raise LeaseExpired(self.fence.lease_id) from exc
                outages += 1
                delay = min(_OUTAGE_FIRST_DELAY * 2 ** min(outages - 1, 10), _OUTAGE_MAX_DELAY)
                await self._sleep(min(delay, left))
            except DomainError:
                raise
            except Exception:
                failures += 1
                if failures == _ATTEMPTS:
                    raise
                await self._sleep(_DELAY * 2 ** (failures - 1))

    def _outlasted(self) -> None:
        if not self._told:
            self._told = True
            _log.warning(
                "lease %s: the database could not be used until the lease expired; its run is left to "
                "the recovery",
                self.fence.lease_id,
                extra={"event": "LEASE_OUTLASTED_BY_OUTAGE"},
            )

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[UnitOfWork]:
        async with AsyncExitStack() as stack:
            uow = await self._open(stack)
            await uow.leases.check(self.fence, self._clock())
            yield uow

    @asynccontextmanager
    async def unchecked(self) -> AsyncIterator[UnitOfWork]:
        """For statements that are fenced themselves (``accept_event_batch``, ``renew``, ``release``):
        checking first would take a shared lock only to upgrade it a moment later."""
        async with AsyncExitStack() as stack:
            yield await self._open(stack)

    async def _open(self, stack: AsyncExitStack) -> UnitOfWork:
        """Begin a unit of work, waiting (``retrying``) while the database cannot be reached: most writes
        through this scope (artifact rows) have no other retry, and a transaction that never began can
        always begin again. One cut short later fails as it is."""
        return await self.retrying(lambda: stack.enter_async_context(self._uow()))


def plain_transactions(uow: UnitOfWorkFactory) -> TransactionScope:
    """The Service's own scope, used when no executor holds the run (recovery, terminal bookkeeping)."""

    @asynccontextmanager
    async def transaction() -> AsyncIterator[UnitOfWork]:
        async with uow() as unit:
            yield unit

    return transaction


async def retrying(
    operation: Callable[[], Awaitable[T]], *, attempts: int = _ATTEMPTS, delay: float = _DELAY
) -> T:
    """Run a whole (idempotent) transaction again after an infrastructure failure such as a busy database.

    Domain errors (``LeaseExpired``, ``RunStateConflict`` ...) are answers, not glitches: they propagate
    at once.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except (DatabaseBusy, DatabaseUnavailable):
            # Told as domain errors to API callers (503), but a glitch to a transaction run again here.
            if attempt == attempts:
                raise
            await asyncio.sleep(delay * 2 ** (attempt - 1))
        except DomainError:
            raise
        except Exception:
            if attempt == attempts:
                raise
            await asyncio.sleep(delay * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
