"""ItemExecutor: runs every attempt of one item under the gate, the rate limiter and the deadlines."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

from ._config import ConfigDocument
from ._enums import ErrorCategory, ItemState
from ._gate import ConcurrencyGate
from ._ports import ExecutionClock
from ._provider import CancellationToken, ProviderSendRequest, ProviderSession
from ._ratelimit import RateLimiter
from ._recipients import RecipientRecord
from ._results import ProviderResult
from ._retry import RetryRules, item_state_for
from ._sessions import ProviderSessionManager
from ._waiting import wait_or_stop

__all__ = ["ItemExecutor", "ItemOutcome"]


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    state: ItemState
    attempt: int
    result: ProviderResult | None
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(slots=True)
class _ItemTiming:
    """Set when the first call actually reaches the provider, so waiting for a serialized session or a
    rate-limit token never eats into the item's deadline."""

    started_at: datetime | None = None
    deadline: float | None = None


class _Flight:
    """One provider call in progress: the token to cancel it cooperatively, the task to abort it."""

    __slots__ = ("task", "token")

    def __init__(self) -> None:
        self.token = CancellationToken()
        self.task: asyncio.Task[ProviderResult] | None = None


class ItemExecutor:
    """Entered holding a gate permit; releases it while backing off and for good when the item ends.

    An item that never reached the provider is UNSENT. Waits that have not reached the provider (rate
    limit, backoff, pause before a retry) end at once when the run stops; provider calls receive the
    cancellation token and end at the item deadline, or are aborted by ``abort_in_flight``.
    """

    def __init__(
        self,
        *,
        run_id: str,
        message_config: ConfigDocument,
        clock: ExecutionClock,
        gate: ConcurrencyGate,
        limiter: RateLimiter,
        rules: RetryRules,
        sessions: ProviderSessionManager,
        stop: asyncio.Event,
        dispatch_open: asyncio.Event,
        item_timeout: timedelta | None,
        run_deadline: float | None,
    ) -> None:
        self._run_id = run_id
        self._message_config = message_config
        self._clock = clock
        self._gate = gate
        self._limiter = limiter
        self._rules = rules
        self._sessions = sessions
        self._stop = stop
        self._dispatch_open = dispatch_open
        self._item_timeout = None if item_timeout is None else item_timeout.total_seconds()
        self._run_deadline = run_deadline
        self._flights: set[_Flight] = set()
        self.retried = 0

    @property
    def in_flight_calls(self) -> int:
        return len(self._flights)

    def cancel_in_flight(self, reason: str) -> None:
        for flight in tuple(self._flights):
            flight.token.cancel(reason)

    def abort_in_flight(self, reason: str) -> None:
        """Used at the run deadline: providers that ignore the token are cut off too."""
        for flight in tuple(self._flights):
            flight.token.cancel(reason)
            if flight.task is not None:
                flight.task.cancel()

    async def execute(self, record: RecipientRecord) -> ItemOutcome:
        holding = True
        attempts = 0
        last: tuple[ProviderResult, ItemState] | None = None
        timing = _ItemTiming()
        try:
            while True:
                if last is not None:
                    if self._stop.is_set() or not self._rules.should_retry(last[0], attempts):
                        break
                    delay = self._rules.delay(last[0], attempts).total_seconds()
                    if not self._fits_deadlines(delay, timing.deadline):
                        break
                    self._gate.release()
                    holding = False
                    if not await wait_or_stop(self._clock.sleep(delay), self._stop):
                        break
                    # A paused run makes no new provider calls, retries included.
                    await self._dispatch_open.wait()
                    if self._stop.is_set() or not await self._gate.acquire():
                        break
                    holding = True
                if not self._limiter.unlimited and not await wait_or_stop(
                    self._limiter.acquire(), self._stop
                ):
                    break
                called = await self._attempt(record, attempts + 1, timing)
                if called is None:
                    break
                attempts += 1
                if attempts > 1:
                    self.retried += 1
                last = called
        finally:
            if holding:
                self._gate.release()
        if last is None:
            return ItemOutcome(ItemState.UNSENT, 0, None, None, None)
        return ItemOutcome(last[1], attempts, last[0], timing.started_at, self._clock.now())

    def _fits_deadlines(self, delay: float, item_deadline: float | None) -> bool:
        wake = self._clock.monotonic() + delay
        return all(deadline is None or wake < deadline for deadline in (item_deadline, self._run_deadline))

    async def _attempt(
        self, record: RecipientRecord, attempt: int, timing: _ItemTiming
    ) -> tuple[ProviderResult, ItemState] | None:
        """One provider call; ``None`` when the run stopped before the provider was reached."""
        flight = _Flight()
        self._flights.add(flight)
        try:
            try:
                async with self._sessions.lease() as session:
                    if not self._dispatch_open.is_set():
                        # Paused before this call reached the provider: it waits like an undispatched item.
                        await self._dispatch_open.wait()
                    if flight.token.cancelled or self._stop.is_set():
                        return None
                    if timing.started_at is None:
                        timing.started_at = self._clock.now()
                        if self._item_timeout is not None:
                            timing.deadline = self._clock.monotonic() + self._item_timeout
                    return await self._call(session, record, attempt, timing.deadline, flight)
            except Exception as exc:
                # Only lease() can get here (sub-session creation): the provider was not called.
                failure = ProviderResult.failure(
                    ErrorCategory.INTERNAL, "WORKER_SESSION_FAILED", f"{type(exc).__name__}: {exc}"
                )
                return failure, ItemState.FAILED
        finally:
            self._flights.discard(flight)

    async def _call(
        self,
        session: ProviderSession,
        record: RecipientRecord,
        attempt: int,
        item_deadline: float | None,
        flight: _Flight,
    ) -> tuple[ProviderResult, ItemState]:
        now = self._clock.monotonic()
        limits = [d - now for d in (item_deadline, self._run_deadline) if d is not None]
        request = ProviderSendRequest(
            run_id=self._run_id,
            item_id=record.item_id,
            attempt=attempt,
            recipient=record,
            message_config=self._message_config,
            # Stable across attempts so an idempotent provider can drop a duplicate delivery.
            idempotency_key=f"{self._run_id}:{record.item_id}",
            deadline=self._clock.now() + timedelta(seconds=max(0.0, min(limits))) if limits else None,
        )
        send = asyncio.ensure_future(session.send(request, flight.token))
        flight.task = send
        timer = (
            asyncio.ensure_future(self._clock.sleep(max(0.0, item_deadline - now)))
            if item_deadline is not None
            else None
        )
        try:
            await asyncio.wait(
                {send} if timer is None else {send, timer}, return_when=asyncio.FIRST_COMPLETED
            )
            if not send.done():
                flight.token.cancel("item deadline exceeded")
                send.cancel()
                await asyncio.wait({send})
                if send.cancelled():
                    return _timeout(
                        "ITEM_DEADLINE_EXCEEDED", "the item deadline passed before the provider answered"
                    )
        finally:
            if timer is not None:
                timer.cancel()
            if not send.done():
                send.cancel()
        if send.cancelled():
            return _timeout("RUN_DEADLINE_EXCEEDED", "the run deadline passed before the provider answered")
        error = send.exception()
        if error is not None:
            # The provider broke its contract; the message may or may not have gone out.
            failure = ProviderResult.failure(
                ErrorCategory.INTERNAL,
                "PROVIDER_EXCEPTION",
                f"{type(error).__name__}: {error}",
                retryable=False,
            )
            return failure, ItemState.UNKNOWN
        result = send.result()
        if not isinstance(result, ProviderResult):
            failure = ProviderResult.failure(
                ErrorCategory.INTERNAL,
                "PROVIDER_CONTRACT_VIOLATION",
                "send() did not return a ProviderResult",
            )
            return failure, ItemState.UNKNOWN
        return result, item_state_for(result)


def _timeout(code: str, message: str) -> tuple[ProviderResult, ItemState]:
    return ProviderResult.failure(ErrorCategory.TIMEOUT, code, message), ItemState.UNKNOWN
