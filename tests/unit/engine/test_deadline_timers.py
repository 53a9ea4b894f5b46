"""Deadline timers: FakeClock.call_at, the shared DeadlineTimers and the fallback for clocks without timers."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

from wepush.agent.engine import ErrorCategory, ItemState, RunState, SystemClock, TimeoutPolicy
from wepush.agent.engine._deadlines import DeadlineTimers
from wepush.agent.engine.testing import FakeClock
from wepush.agent.providers.fake import FakeProviderFactory, Hang

from .support import Harness, policies, spec


class _Subject:
    def __init__(self, name: str, clock: FakeClock, expired: list[tuple[str, float]]) -> None:
        self.name = name
        self._clock = clock
        self._expired = expired

    def expire(self) -> None:
        self._expired.append((self.name, self._clock.monotonic()))


class _SleepOnlyClock:
    """An ExecutionClock with nothing but the protocol's three methods (no ``call_at``)."""

    def __init__(self, inner: FakeClock) -> None:
        self.inner = inner

    def now(self) -> datetime:
        return self.inner.now()

    def monotonic(self) -> float:
        return self.inner.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


async def test_fake_clock_call_at_fires_at_its_time_and_a_cancelled_timer_never_fires() -> None:
    clock = FakeClock()
    fired: list[tuple[str, float]] = []
    clock.call_at(2.0, lambda: fired.append(("b", clock.monotonic())))
    clock.call_at(1.0, lambda: fired.append(("a", clock.monotonic())))
    cancelled = clock.call_at(1.5, lambda: fired.append(("never", clock.monotonic())))
    cancelled.cancel()
    await clock.advance(0.5)
    assert fired == []
    await clock.advance(5)
    assert fired == [("a", 1.0), ("b", 2.0)]
    clock.call_at(0.0, lambda: fired.append(("past", clock.monotonic())))
    await clock.advance(0)
    assert fired[-1] == ("past", 5.5)
    assert clock.pending_sleepers == 0


async def test_system_clock_call_at_runs_the_callback_and_can_be_cancelled() -> None:
    clock = SystemClock()
    done = asyncio.get_running_loop().create_future()
    clock.call_at(clock.monotonic(), lambda: done.set_result("fired"))
    disarmed = clock.call_at(clock.monotonic(), lambda: done.set_result("disarmed"))
    disarmed.cancel()
    assert await asyncio.wait_for(done, 5) == "fired"


async def test_in_order_deadlines_share_one_timer_and_each_expires_on_time() -> None:
    clock = FakeClock()
    expired: list[tuple[str, float]] = []
    timers = DeadlineTimers(clock)
    a, b, c = (_Subject(name, clock, expired) for name in "abc")
    timers.arm(a, 10.0)
    timers.arm(b, 11.0)
    timers.arm(c, 12.0)
    assert clock.pending_sleepers == 1
    timers.disarm(b)
    await clock.advance(20)
    assert expired == [("a", 10.0), ("c", 12.0)]
    assert timers.armed == 0
    assert clock.pending_sleepers == 0


async def test_an_earlier_deadline_than_one_already_armed_gets_its_own_timer() -> None:
    clock = FakeClock()
    expired: list[tuple[str, float]] = []
    timers = DeadlineTimers(clock)
    late, retry, gone = (_Subject(name, clock, expired) for name in ("late", "retry", "gone"))
    timers.arm(late, 30.0)
    timers.arm(retry, 5.0)
    timers.arm(gone, 4.0)
    timers.disarm(gone)
    await clock.advance(10)
    assert expired == [("retry", 5.0)]
    await clock.advance(30)
    assert expired == [("retry", 5.0), ("late", 30.0)]


async def test_a_shared_timer_whose_call_finished_moves_on_to_the_next_deadline() -> None:
    clock = FakeClock()
    expired: list[tuple[str, float]] = []
    timers = DeadlineTimers(clock)
    first, second = _Subject("first", clock, expired), _Subject("second", clock, expired)
    timers.arm(first, 10.0)
    await clock.advance(5)
    timers.disarm(first)
    timers.arm(second, 15.0)
    await clock.advance(7)
    assert expired == []
    assert clock.next_deadline == 15.0
    await clock.advance(3)
    assert expired == [("second", 15.0)]


async def test_closing_disarms_every_deadline() -> None:
    clock = FakeClock()
    expired: list[tuple[str, float]] = []
    timers = DeadlineTimers(clock)
    timers.arm(_Subject("x", clock, expired), 5.0)
    timers.arm(_Subject("y", clock, expired), 1.0)
    timers.close()
    await clock.advance(10)
    assert expired == []
    assert clock.pending_sleepers == 0


async def test_deadline_timers_fall_back_to_sleeping_on_a_clock_without_call_at() -> None:
    clock = FakeClock()
    expired: list[tuple[str, float]] = []
    timers = DeadlineTimers(_SleepOnlyClock(clock))
    a, b = _Subject("a", clock, expired), _Subject("b", clock, expired)
    timers.arm(a, 3.0)
    timers.arm(b, 1.0)
    await clock.advance(5)
    assert expired == [("b", 1.0), ("a", 3.0)]


async def test_the_item_deadline_holds_on_a_clock_without_call_at() -> None:
    h = Harness(count=2)
    plain = _SleepOnlyClock(h.clock)
    run_spec = spec(policy=policies(timeout=TimeoutPolicy(item=timedelta(seconds=20))))
    ports = dataclasses.replace(h.ports, clock=plain)
    provider = FakeProviderFactory(default=Hang(), honour_cancellation=False)
    handle = await h.engine(provider).start(run_spec, ports)
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.FAILED
    assert {r.provider_code for r in h.results.results.values()} == {"ITEM_DEADLINE_EXCEEDED"}
    assert {r.state for r in h.results.results.values()} == {ItemState.UNKNOWN}
    assert {r.error_category for r in h.results.results.values()} == {ErrorCategory.TIMEOUT}
    assert {r.latency_ms for r in h.results.results.values()} == {20_000}


async def test_at_one_instant_sleepers_wake_before_timers() -> None:
    clock = FakeClock()
    order: list[str] = []
    clock.call_at(2.0, lambda: order.append("timer"))

    async def sleeper() -> None:
        await clock.sleep(2.0)
        order.append("sleeper")

    task = asyncio.create_task(sleeper())
    await clock.advance(2.0)
    await task
    assert order == ["sleeper", "timer"]


async def test_a_call_answering_exactly_at_its_item_deadline_is_in_time() -> None:
    h = Harness(count=1)
    run_spec = spec(policy=policies(timeout=TimeoutPolicy(item=timedelta(seconds=20))))
    summary = await h.run(FakeProviderFactory(latency=20.0, honour_cancellation=False), run_spec)
    [result] = h.results.results.values()
    assert result.state is ItemState.SUCCEEDED
    assert result.latency_ms == 20_000
    assert summary.final_state is RunState.SUCCEEDED
