"""Deadline timers on the execution clock: how provider calls are cut off at their item deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from ._ports import ExecutionClock

__all__ = ["ClockTimer", "DeadlineTimers", "Expiring", "ScheduleAt", "deadline_scheduler"]


class ClockTimer(Protocol):
    """A scheduled callback that can still be disarmed."""

    def cancel(self) -> object: ...


class Expiring(Protocol):
    """Something with a deadline; ``expire`` is called once the deadline has passed."""

    def expire(self) -> None: ...


ScheduleAt = Callable[[float, Callable[[], object]], ClockTimer]
"""``schedule(when, callback)``: run ``callback`` once the clock's ``monotonic()`` reaches ``when``."""


def deadline_scheduler(clock: ExecutionClock) -> ScheduleAt:
    """The clock's own ``call_at`` when it has one (SystemClock, FakeClock); otherwise a task that sleeps
    on the clock. Both fire at the same clock time, the first one without a task per timer."""
    call_at: ScheduleAt | None = getattr(clock, "call_at", None)
    if call_at is not None:
        return call_at

    def sleep_then_call(when: float, callback: Callable[[], object]) -> ClockTimer:
        async def fire() -> None:
            await clock.sleep(when - clock.monotonic())
            callback()

        return asyncio.ensure_future(fire())

    return sleep_then_call


class DeadlineTimers:
    """Every armed deadline expires once the clock reaches it, but in-order deadlines share one timer.

    A run's item timeout is the same for every item and the clock is monotonic, so first attempts arm
    their deadlines in non-decreasing order: the oldest armed deadline is always the next one due. Those
    wait in an insertion-ordered dict, and a single clock timer is armed for the front. Disarming is a dict
    removal; the shared timer is left alone, and when it fires early (its call already finished) it simply
    moves on to the new front. Only a deadline earlier than one already armed (a retry keeps its item's
    first deadline) gets a timer of its own.
    """

    def __init__(self, clock: ExecutionClock) -> None:
        self._clock = clock
        self._schedule = deadline_scheduler(clock)
        self._ordered: dict[Expiring, float] = {}
        self._latest = float("-inf")
        self._timer: ClockTimer | None = None
        self._solo: dict[Expiring, ClockTimer] = {}

    @property
    def armed(self) -> int:
        return len(self._ordered) + len(self._solo)

    def arm(self, subject: Expiring, when: float) -> None:
        if when >= self._latest:
            self._latest = when
            self._ordered[subject] = when
            if self._timer is None:
                self._timer = self._schedule(when, self._fire)
        else:
            self._solo[subject] = self._schedule(when, self._solo_fire(subject))

    def disarm(self, subject: Expiring) -> None:
        if self._ordered.pop(subject, None) is None:
            timer = self._solo.pop(subject, None)
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        """Disarm everything (the run is over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for timer in self._solo.values():
            timer.cancel()
        self._ordered.clear()
        self._solo.clear()

    def _fire(self) -> None:
        self._timer = None
        ordered = self._ordered
        now = self._clock.monotonic()
        while ordered:
            subject, when = next(iter(ordered.items()))
            if when > now:
                self._timer = self._schedule(when, self._fire)
                return
            del ordered[subject]
            subject.expire()

    def _solo_fire(self, subject: Expiring) -> Callable[[], None]:
        def fire() -> None:
            if self._solo.pop(subject, None) is not None:
                subject.expire()

        return fire
