"""FakeClock, ConcurrencyGate and RateLimiter: the timing building blocks of the engine."""

from __future__ import annotations

import asyncio

import pytest

from wepush.agent.engine import RateLimitPolicy
from wepush.agent.engine._gate import ConcurrencyGate
from wepush.agent.engine._ratelimit import RateLimiter
from wepush.agent.engine.testing import ClockDeadlockError, FakeClock


async def test_fake_clock_wakes_sleepers_in_deadline_order_only_when_advanced() -> None:
    clock = FakeClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic()))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("c", 3), ("a", 1), ("b", 2), ("a2", 1))]
    await clock.advance(0.5)
    assert woke == []
    await clock.advance(2)
    assert woke == [("a", 1), ("a2", 1), ("b", 2)]
    assert clock.monotonic() == 2.5
    await clock.advance(10)
    assert woke[-1] == ("c", 3)
    await asyncio.gather(*tasks)
    assert (clock.now() - FakeClock().now()).total_seconds() == 12.5


async def test_fake_clock_run_jumps_time_and_detects_deadlock() -> None:
    clock = FakeClock()

    async def work() -> float:
        await clock.sleep(3600)
        return clock.monotonic()

    assert await clock.run(work()) == 3600
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(ClockDeadlockError):
        await clock.run(never)


async def test_gate_grows_at_once_and_shrinks_only_as_holders_release() -> None:
    gate = ConcurrencyGate(2)
    assert await gate.acquire()
    assert await gate.acquire()
    waiters = [asyncio.create_task(gate.acquire()) for _ in range(3)]
    await asyncio.sleep(0)
    assert gate.in_use == 2
    gate.resize(4)
    await asyncio.sleep(0)
    assert gate.in_use == 4
    assert sum(w.done() for w in waiters) == 2
    gate.resize(1)
    for _ in range(3):
        gate.release()
    await asyncio.sleep(0)
    assert gate.in_use == 1
    assert not waiters[2].done()
    gate.release()
    await asyncio.sleep(0)
    assert waiters[2].done()
    assert gate.in_use == 1
    assert gate.peak == 4


async def test_closing_the_gate_releases_waiters_without_a_permit() -> None:
    gate = ConcurrencyGate(1)
    assert await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    gate.close()
    assert await waiter is False
    assert await gate.acquire() is False
    assert gate.in_use == 1


async def test_cancelled_waiter_returns_a_permit_it_was_just_granted() -> None:
    gate = ConcurrencyGate(1)
    assert await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # hands the permit to the waiter...
    waiter.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.in_use == 0


async def test_rate_limiter_spaces_permits_on_the_clock_after_the_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimitPolicy(permits_per_second=2, burst=2), clock)
    times: list[float] = []

    async def take(n: int) -> None:
        for _ in range(n):
            await limiter.acquire()
            times.append(clock.monotonic())

    await clock.run(take(6))
    assert times == pytest.approx([0, 0, 0.5, 1.0, 1.5, 2.0])


async def test_unlimited_rate_limiter_never_waits() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimitPolicy(), clock)
    for _ in range(1000):
        await limiter.acquire()
    assert clock.monotonic() == 0


async def test_rate_limiter_try_acquire_takes_only_available_tokens_and_never_jumps_the_queue() -> None:
    clock = FakeClock()
    limiter = RateLimiter(RateLimitPolicy(permits_per_second=2, burst=2), clock)
    assert limiter.try_acquire()
    assert limiter.try_acquire()
    assert not limiter.try_acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await clock.advance(0.25)
    assert not waiter.done()
    assert not limiter.try_acquire()  # a waiter is queued for the next token
    await clock.advance(0.25)
    assert waiter.done()
    await clock.advance(0.5)
    assert limiter.try_acquire()
    assert RateLimiter(RateLimitPolicy(), clock).try_acquire()
