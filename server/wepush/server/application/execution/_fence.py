"""Transactions of the executing side. Every write made while a run executes carries its lease fence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import TypeVar

from wepush.server.domain import (
    DatabaseBusy,
    DatabaseUnavailable,
    DomainError,
    LeaseFence,
    UnitOfWork,
    UnitOfWorkFactory,
)

__all__ = ["LeaseGuard", "TransactionScope", "plain_transactions", "retrying"]

T = TypeVar("T")

TransactionScope = Callable[[], AbstractAsyncContextManager[UnitOfWork]]
"""Opens one write transaction; the executor's scope checks the fence first, the Service's does not."""


class LeaseGuard:
    """Opens write transactions that first prove the lease is still ours (``leases.check``): a revoked or
    expired lease, or an older epoch, makes the whole transaction fail with ``LeaseExpired``."""

    def __init__(self, uow: UnitOfWorkFactory, fence: LeaseFence, clock: Callable[[], datetime]) -> None:
        self._uow = uow
        self.fence = fence
        self._clock = clock

    def now(self) -> datetime:
        """The instant a fenced write is checked at (the lease must not have expired by then)."""
        return self._clock()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[UnitOfWork]:
        async with self._uow() as uow:
            await uow.leases.check(self.fence, self._clock())
            yield uow

    @asynccontextmanager
    async def unchecked(self) -> AsyncIterator[UnitOfWork]:
        """For statements that are fenced themselves (``accept_event_batch``, ``renew``, ``release``):
        checking first would take a shared lock only to upgrade it a moment later."""
        async with self._uow() as uow:
            yield uow


def plain_transactions(uow: UnitOfWorkFactory) -> TransactionScope:
    """The Service's own scope, used when no executor holds the run (recovery, terminal bookkeeping)."""

    @asynccontextmanager
    async def transaction() -> AsyncIterator[UnitOfWork]:
        async with uow() as unit:
            yield unit

    return transaction


async def retrying(operation: Callable[[], Awaitable[T]], *, attempts: int = 4, delay: float = 0.1) -> T:
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
