"""ItemExecutor: runs every attempt of one item under the gate, the rate limiter and the deadlines."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from ._config import ConfigDocument
from ._control import RunControl
from ._deadlines import DeadlineTimers
from ._enums import ErrorCategory, ItemState
from ._hotpath import send_request
from ._ports import ExecutionClock, ExecutionObserver
from ._provider import _PROGRESS_UNTOLD, CancellationToken, ProviderSendRequest, ProviderSession
from ._ratelimit import RateLimiter
from ._recipients import RecipientRecord
from ._results import ProviderResult
from ._retry import RetryRules, item_state_for
from ._sessions import ProviderSessionManager
from ._waiting import wait_or_stop

__all__ = ["SKIPPED", "UNSENT", "ItemExecutor", "ItemOutcome"]

_ITEM_DEADLINE = "ITEM_DEADLINE_EXCEEDED"
_RUN_DEADLINE = "RUN_DEADLINE_EXCEEDED"
_DEADLINE_MESSAGES = {
    _ITEM_DEADLINE: "the item deadline passed before the provider answered",
    _RUN_DEADLINE: "the run deadline passed before the provider answered",
}
_UNSENT_DEADLINE_MESSAGES = {
    _ITEM_DEADLINE: "the item deadline passed before the call reached the vendor; nothing was sent",
    _RUN_DEADLINE: "the run deadline passed before the call reached the vendor; nothing was sent",
}


ItemOutcome = tuple[ItemState, int, ProviderResult | None, datetime | None, datetime | None]
"""(state, attempts, last result, startedAt, finishedAt) of a finished item: a bare tuple, as one is built
per item."""

UNSENT: ItemOutcome = (ItemState.UNSENT, 0, None, None, None)
SKIPPED: ItemOutcome = (ItemState.SKIPPED, 0, None, None, None)


class _Flight(CancellationToken):
    """One provider call in progress: the token the provider receives, plus the task awaiting the
    provider while the call runs, so a deadline can cut the call off (one object per call, not two)."""

    __slots__ = ("cut", "task")

    def __init__(self) -> None:
        # CancellationToken.__init__, inlined: one call less per provider call.
        self._cancelled = False
        self._reason = None
        self._callbacks = None
        self._event = None
        self._progress = _PROGRESS_UNTOLD
        # Set only while the provider is being awaited: a call still waiting for its session or for a
        # resume has not reached the provider, and a deadline must not cancel the wait itself.
        self.task: asyncio.Task[Any] | None = None
        # The result code of the deadline that cancelled ``task``; the first deadline wins.
        self.cut: str | None = None

    def cut_off(self, code: str, reason: str) -> None:
        self.cancel(reason)
        task = self.task
        if task is not None and self.cut is None:
            self.cut = code
            task.cancel()

    def expire(self) -> None:
        self.cut_off(_ITEM_DEADLINE, "item deadline exceeded")


class ItemExecutor:
    """Entered holding a gate permit; releases it while backing off and hands it back when the item ends.

    An item that never reached the provider is UNSENT. Waits that have not reached the provider (rate
    limit, backoff, pause before a retry) end at once when the run stops; provider calls receive the
    cancellation token and end at the item deadline, or are aborted by ``abort_in_flight``.

    The provider is awaited in the caller's task, not a task of its own: a deadline is a timer on the
    execution clock that cancels the token and then that task, and the cancellation is taken back
    (``Task.uncancel``) when it turns into a timeout result, the same protocol ``asyncio.timeout`` uses.
    The item deadline starts when the first call actually reaches the provider, so waiting for a
    serialized session or a rate-limit token never eats into it.
    """

    def __init__(
        self,
        *,
        run_id: str,
        message_config: ConfigDocument,
        clock: ExecutionClock,
        control: RunControl,
        limiter: RateLimiter,
        rules: RetryRules,
        sessions: ProviderSessionManager,
        item_timeout: timedelta | None,
        run_deadline: float | None,
        observer: ExecutionObserver | None = None,
    ) -> None:
        self._run_id = run_id
        self._message_config = message_config
        self._clock = clock
        self.deadlines = DeadlineTimers(clock)
        self._control = control
        self._gate = control.gate
        self._stop = control.stop
        self._dispatch_open = control.dispatch_open
        self._limiter = limiter
        self._limited = not limiter.unlimited
        self._rules = rules
        self._sessions = sessions
        self._item_timeout = item_timeout
        self._run_deadline = run_deadline
        self._flights: set[_Flight] = set()
        self._observer = observer
        self.retried = 0
        # Started items that are not at the provider but waiting before a call: for a rate-limit token,
        # through a retry's backoff (and for the permit after it), or for a pause to end. Only these slow
        # paths count, never the fast path. A paused run shows these items as pending, not in flight.
        self.waiting = 0

    @property
    def in_flight_calls(self) -> int:
        return len(self._flights)

    def cancel_in_flight(self, reason: str) -> None:
        for flight in tuple(self._flights):
            flight.cancel(reason)

    def abort_in_flight(self, reason: str) -> None:
        """Used at the run deadline: providers that ignore the token are cut off too."""
        for flight in tuple(self._flights):
            flight.cut_off(_RUN_DEADLINE, reason)

    async def execute(self, record: RecipientRecord, task: asyncio.Task[Any]) -> tuple[ItemOutcome, bool]:
        """Run ``record`` inside ``task`` (the current task, which a deadline may cancel).

        Returns the item's outcome and whether the caller still holds a permit, to release or to carry
        over to its next item. An exception leaves no permit held.
        """
        holding = True
        attempts = 0
        last: tuple[ProviderResult, ItemState] | None = None
        started_at: datetime | None = None
        deadline: float | None = None
        wall_deadline: datetime | None = None
        sessions = self._sessions
        try:
            while True:
                if last is not None:
                    if (
                        last[0].success
                        or self._stop.is_set()
                        or not self._rules.should_retry(last[0], attempts)
                    ):
                        break
                    delay = self._rules.delay(last[0], attempts).total_seconds()
                    if not self._fits_deadlines(delay, deadline):
                        break
                    self._gate.release()
                    holding = False
                    self.waiting += 1
                    try:
                        if not await wait_or_stop(self._clock.sleep(delay), self._stop):
                            break
                        # A paused run makes no new provider calls, retries included.
                        await self._dispatch_open.wait()
                        if self._stop.is_set() or not await self._gate.acquire():
                            break
                    finally:
                        self.waiting -= 1
                    holding = True
                if self._limited and not self._limiter.try_acquire():
                    self.waiting += 1
                    try:
                        acquired = await wait_or_stop(self._limiter.acquire(), self._stop)
                    finally:
                        self.waiting -= 1
                    if not acquired:
                        break
                # One provider call.
                flight = _Flight()
                self._flights.add(flight)
                called: tuple[ProviderResult, ItemState] | None = None
                session = sessions.shared
                leased = session is None
                try:
                    if session is None:
                        try:
                            session = await sessions.acquire()
                        except Exception as exc:
                            # Sub-session creation failed: the provider was not called.
                            leased = False
                            called = _failed("WORKER_SESSION_FAILED", f"{type(exc).__name__}: {exc}")
                    if session is not None:
                        if not self._control.dispatching:
                            # Paused before this call reached the provider: it waits like an
                            # undispatched item.
                            if not self._dispatch_open.is_set():
                                self.waiting += 1
                                try:
                                    await self._dispatch_open.wait()
                                finally:
                                    self.waiting -= 1
                            if self._stop.is_set():
                                break
                        if flight.cancelled:
                            break
                        if started_at is None:
                            started_at = self._clock.now()
                            if self._item_timeout is not None:
                                deadline = self._clock.monotonic() + self._item_timeout.total_seconds()
                                wall_deadline = started_at + self._item_timeout
                        request = send_request(
                            self._run_id,
                            record.item_id,
                            attempts + 1,
                            record,
                            self._message_config,
                            # Stable across attempts so an idempotent provider can drop a duplicate.
                            f"{self._run_id}:{record.item_id}",
                            wall_deadline if self._run_deadline is None else self._request_deadline(deadline),
                        )
                        observer = self._observer
                        if observer is None:
                            called = await self._call(session, request, flight, deadline, task)
                        else:
                            began = self._clock.monotonic()
                            called = await self._call(session, request, flight, deadline, task)
                            observer.provider_call(called[0], called[1], self._clock.monotonic() - began)
                finally:
                    if leased and session is not None:
                        sessions.release(session)
                    self._flights.discard(flight)
                attempts += 1
                if attempts > 1:
                    self.retried += 1
                    # Counted once made, like ``retried``: a retry the deadline or a stop cut off while
                    # it waited was never made.
                    if self._observer is not None and last is not None:
                        self._observer.retrying(last[0].category)
                last = called
        except BaseException:
            if holding:
                self._gate.release()
            raise
        if last is None:
            return UNSENT, holding
        return (last[1], attempts, last[0], started_at, self._clock.now()), holding

    def _fits_deadlines(self, delay: float, item_deadline: float | None) -> bool:
        wake = self._clock.monotonic() + delay
        return all(deadline is None or wake < deadline for deadline in (item_deadline, self._run_deadline))

    def _request_deadline(self, item_deadline: float | None) -> datetime:
        """The earlier of the item and the run deadline, as an instant for the provider."""
        now = self._clock.monotonic()
        limits = [d - now for d in (item_deadline, self._run_deadline) if d is not None]
        return self._clock.now() + timedelta(seconds=max(0.0, min(limits)))

    async def _call(
        self,
        session: ProviderSession,
        request: ProviderSendRequest,
        flight: _Flight,
        deadline: float | None,
        task: asyncio.Task[Any],
    ) -> tuple[ProviderResult, ItemState]:
        # Cancellation requests already pending on the task are not this call's to take back.
        base = task.cancelling()
        flight.task = task
        if deadline is not None:
            self.deadlines.arm(flight, deadline)
        try:
            result = await session.send(request, flight)
        except asyncio.CancelledError:
            # A deadline's own cancellation becomes a timeout result, and so does a provider that
            # answered its token by cancelling its own task. Any other cancellation (the loop shutting
            # down) keeps propagating.
            if (flight.cut is None and not flight.cancelled) or task.uncancel() > base:
                raise
            if flight.cut is None:
                return _cancelled()
            return _timeout(flight.cut) if not flight.nothing_sent else _not_reached(flight.cut)
        except Exception as error:
            if flight.cut is not None:
                task.uncancel()
            # The provider broke its contract; the message may or may not have gone out.
            return _unknown("PROVIDER_EXCEPTION", f"{type(error).__name__}: {error}")
        finally:
            flight.task = None
            if deadline is not None:
                self.deadlines.disarm(flight)
        if flight.cut is not None:
            # The provider swallowed the deadline's cancellation and answered: its answer stands.
            task.uncancel()
        if not isinstance(result, ProviderResult):
            return _unknown("PROVIDER_CONTRACT_VIOLATION", "send() did not return a ProviderResult")
        return result, ItemState.SUCCEEDED if result.success else item_state_for(result)


def _failed(code: str, diagnostic: str) -> tuple[ProviderResult, ItemState]:
    return ProviderResult.failure(ErrorCategory.INTERNAL, code, diagnostic), ItemState.FAILED


def _unknown(code: str, diagnostic: str) -> tuple[ProviderResult, ItemState]:
    failure = ProviderResult.failure(ErrorCategory.INTERNAL, code, diagnostic, retryable=False)
    return failure, ItemState.UNKNOWN


def _cancelled() -> tuple[ProviderResult, ItemState]:
    failure = ProviderResult.failure(ErrorCategory.CANCELLED, "CANCELLED", "the call was cancelled")
    return failure, ItemState.UNKNOWN


def _timeout(code: str) -> tuple[ProviderResult, ItemState]:
    failure = ProviderResult.failure(ErrorCategory.TIMEOUT, code, _DEADLINE_MESSAGES[code])
    return failure, ItemState.UNKNOWN


def _not_reached(code: str) -> tuple[ProviderResult, ItemState]:
    """A deadline cut the call off while the provider said it had sent nothing (connecting): FAILED, as
    a vendor that could not be reached in time is, never UNKNOWN."""
    failure = ProviderResult.failure(ErrorCategory.NETWORK, code, _UNSENT_DEADLINE_MESSAGES[code])
    return failure, ItemState.FAILED
