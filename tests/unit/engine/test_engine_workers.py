"""Worker tasks: permits carried from item to item, fairness to retries, cooperative yielding, and
provider calls awaited in the worker's own task (deadline cancellation taken back cleanly)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, Sequence
from datetime import timedelta
from typing import Any

from wepush.agent.engine import (
    CancellationToken,
    CancelRun,
    ConcurrencyPolicy,
    EngineOptions,
    ErrorCategory,
    ItemState,
    PauseRun,
    ProviderOpenContext,
    ProviderResult,
    ProviderSendRequest,
    RecipientRecord,
    ResumeRun,
    RunExecutionSpec,
    RunState,
    ThreadSafetyMode,
    TimeoutPolicy,
)
from wepush.agent.engine._gate import ConcurrencyGate
from wepush.agent.engine.testing import FakeClock, InMemoryRecipientSource
from wepush.agent.providers.fake import FakeProviderFactory, FakeSession

from .support import Harness, assert_accounted, policies, spec

THREAD_SAFE = ThreadSafetyMode.THREAD_SAFE


def _concurrent(target: int, **others: Any) -> RunExecutionSpec:
    return spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=32, target=target), **others))


async def test_keep_passes_the_waiting_dispatcher_but_never_a_waiting_retry() -> None:
    gate = ConcurrencyGate(1)
    assert await gate.acquire()
    dispatcher = asyncio.create_task(gate.acquire(dispatcher=True))
    await asyncio.sleep(0)
    assert gate.keep()  # the dispatcher would only have started the very item the holder starts now
    retry = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    assert gate.keep()  # the retry queued behind the dispatcher, as it would with a release
    gate.release()
    await asyncio.sleep(0)
    assert dispatcher.done()
    assert not gate.keep()  # now the retry is first in line: the permit must go to it
    gate.release()
    assert await retry is True
    gate.resize(2)
    assert await gate.acquire()
    gate.resize(1)
    assert not gate.keep()  # shrunk below what is held: the permit has to go back
    gate.close()
    assert not gate.keep()


async def test_an_item_backing_off_frees_its_slot_and_retries_in_its_turn() -> None:
    h = Harness(count=3)
    calls: list[tuple[int, int, float]] = []
    limited = ProviderResult.failure(ErrorCategory.RATE_LIMITED, "429", retry_after=timedelta(seconds=1))

    def outcome(request: ProviderSendRequest) -> ProviderResult:
        calls.append((request.recipient.sequence, request.attempt, h.clock.monotonic()))
        return limited if request.recipient.sequence == 1 and request.attempt == 1 else ProviderResult.ok()

    provider = FakeProviderFactory(
        outcome=outcome,
        latency=lambda r: 5.0 if r.recipient.sequence == 2 else 0.0,
        thread_safety=THREAD_SAFE,
    )
    summary = await h.run(provider, _concurrent(1))
    # Item 1 backs off without its permit, so item 2 starts at once; the dispatcher queued for the
    # permit before item 1's retry did, so item 3 goes first when item 2 ends, then the retry.
    assert calls == [(1, 1, 0.0), (2, 1, 0.0), (3, 1, 5.0), (1, 2, 5.0)]
    assert summary.final_state is RunState.SUCCEEDED
    assert summary.retried == 1
    assert_accounted(summary, h)


async def test_a_run_creates_tasks_per_concurrent_slot_not_per_item() -> None:
    loop = asyncio.get_running_loop()
    created = 0
    previous = loop.get_task_factory()

    def counting(
        loop: asyncio.AbstractEventLoop, coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any]
    ) -> asyncio.Future[Any]:
        nonlocal created
        created += 1
        return asyncio.Task(coro, loop=loop)

    h = Harness(count=2000)
    # Without cancellation support the fake sleeps inline instead of racing the token in two tasks.
    provider = FakeProviderFactory(latency=1.0, thread_safety=THREAD_SAFE, honour_cancellation=False)
    loop.set_task_factory(counting)
    try:
        summary = await h.run(provider, _concurrent(8))
    finally:
        loop.set_task_factory(previous)
    assert summary.succeeded == 2000
    assert (summary.ended_at - summary.started_at).total_seconds() == 250
    assert provider.stats.peak == 8
    # The provider's own latency sleeps make no tasks; the engine's background tasks and the workers
    # (a few per read batch) stay far below one per item.
    assert created < 200


async def test_a_provider_that_never_suspends_still_lets_a_pause_in() -> None:
    h = Harness(count=5000)
    provider = FakeProviderFactory(thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _concurrent(8))
    for _ in range(5):
        await asyncio.sleep(0)
    assert (await handle.submit(PauseRun("p"))).accepted
    await h.clock.advance(0)
    calls_at_pause = len(provider.calls)
    assert 0 < calls_at_pause < 5000
    await h.clock.advance(30)
    assert len(provider.calls) == calls_at_pause
    await handle.submit(ResumeRun("r"))
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert_accounted(summary, h)


class _SwallowingSession(FakeSession):
    """Item 1 hangs and answers the deadline's cancellation with a result; the rest answer at once."""

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        self._factory.calls.append(request)
        if request.recipient.sequence == 1:
            try:
                await self.context.clock.sleep(3600)
            except asyncio.CancelledError:
                return ProviderResult.ok("ANSWERED_LATE")
        await self.context.clock.sleep(1)
        return ProviderResult.ok()


class _SelfCancellingSession(FakeSession):
    """Answers its token by cancelling its own task and letting the CancelledError escape."""

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        self._factory.calls.append(request)
        task = asyncio.current_task()
        assert task is not None

        def cancel_own_task() -> None:
            task.cancel()

        token.add_callback(cancel_own_task)
        await self.context.clock.sleep(3600)
        return ProviderResult.ok()


class _Factory(FakeProviderFactory):
    def __init__(self, session_type: type[FakeSession], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._session_type = session_type

    async def open(self, context: ProviderOpenContext) -> FakeSession:
        session = self._session_type(self, context, None)
        self.sessions.append(session)
        return session


async def test_a_provider_answering_the_deadline_cancellation_keeps_its_answer_and_its_worker() -> None:
    h = Harness(count=4)
    provider = _Factory(_SwallowingSession, thread_safety=THREAD_SAFE)
    run_spec = _concurrent(1, timeout=TimeoutPolicy(item=timedelta(seconds=20)))
    summary = await h.run(provider, run_spec)
    first = h.results.results[("item-0000001", 1)]
    assert first.state is ItemState.SUCCEEDED
    assert first.provider_code == "ANSWERED_LATE"
    assert first.latency_ms == 20_000
    # The same worker went on with the other items; none was cut off by a stale cancellation.
    assert summary.succeeded == 4
    assert (summary.ended_at - summary.started_at).total_seconds() == 23
    assert_accounted(summary, h)


async def test_a_provider_cancelling_its_own_task_on_the_token_is_recorded_not_lost() -> None:
    h = Harness(count=10)
    provider = _Factory(_SelfCancellingSession, thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _concurrent(3))
    await h.clock.advance(1)
    assert len(provider.calls) == 3
    await handle.submit(CancelRun("c"))
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert (summary.unknown, summary.unsent) == (3, 7)
    unknown = [r for r in h.results.results.values() if r.state is ItemState.UNKNOWN]
    assert {r.error_category for r in unknown} == {ErrorCategory.CANCELLED}
    assert_accounted(summary, h)


async def test_a_rate_limited_run_spaces_its_calls_on_the_clock() -> None:
    from wepush.agent.engine import RateLimitPolicy

    h = Harness(count=8)
    times: list[float] = []

    def outcome(request: ProviderSendRequest) -> ProviderResult:
        times.append(h.clock.monotonic())
        return ProviderResult.ok()

    provider = FakeProviderFactory(outcome=outcome, thread_safety=THREAD_SAFE)
    run_spec = _concurrent(4, rate_limit=RateLimitPolicy(permits_per_second=2, burst=2))
    summary = await h.run(provider, run_spec)
    assert times == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert summary.succeeded == 8
    assert_accounted(summary, h)


async def test_the_run_deadline_never_cancels_a_call_still_waiting_for_a_serialized_session() -> None:
    h = Harness(count=10)
    provider = FakeProviderFactory(latency=10.0, thread_safety=ThreadSafetyMode.SERIALIZED)
    run_spec = _concurrent(4, timeout=TimeoutPolicy(item=timedelta(seconds=12), run=timedelta(seconds=15)))
    summary = await h.run(provider, run_spec)
    # Item 1 ran 0-10s, item 2 was cut off at 15s; items 3 and 4 were still queued for the session.
    assert (summary.ended_at - summary.started_at).total_seconds() == 15
    assert (summary.succeeded, summary.unknown, summary.unsent) == (1, 1, 8)
    codes = {r.provider_code for r in h.results.results.values() if r.state is ItemState.UNKNOWN}
    assert codes == {"RUN_DEADLINE_EXCEEDED"}
    assert summary.final_state is RunState.PARTIAL
    assert_accounted(summary, h)


class _SlowSource(InMemoryRecipientSource):
    """Takes ``delay`` seconds of the fake clock per batch and notes how many items had started by then."""

    def __init__(self, count: int, clock: FakeClock, delay: float, started: Callable[[], int]) -> None:
        super().__init__(count)
        self._clock = clock
        self._delay = delay
        self._started = started
        self.started_at_read: list[int] = []

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        self.started_at_read.append(self._started())
        await self._clock.sleep(self._delay)
        return await super().next_batch(max_items)


async def _slow_read_run(low_water: int) -> tuple[float, _SlowSource, Harness]:
    clock = FakeClock()
    provider = FakeProviderFactory(latency=0.1, thread_safety=THREAD_SAFE)
    source = _SlowSource(400, clock, 1.0, lambda: len(provider.calls))
    h = Harness(clock=clock, source=source)
    options = EngineOptions(read_batch_size=100, read_low_water=low_water)
    summary = await h.run(provider, _concurrent(10), options)
    assert summary.succeeded == 400
    assert_accounted(summary, h)
    return (summary.ended_at - summary.started_at).total_seconds(), source, h


async def test_the_next_batch_is_read_while_the_previous_one_is_still_being_sent() -> None:
    # Four batches of 100 at 10 in flight take 1 s each to send; every read takes 1 s as well.
    elapsed, source, _ = await _slow_read_run(low_water=100)
    # The second read starts as the first batch starts, long before that batch has been sent.
    assert source.started_at_read[0] == 0
    assert source.started_at_read[1] <= 10
    # Reads overlap sending: one read to start with, then four seconds of sending.
    assert elapsed == 5.0
    waiting, waiting_source, _ = await _slow_read_run(low_water=0)
    # Without read-ahead dispatch stops for every read: 5 reads (the last one empty) + 4 s of sending,
    # less the last 0.1 s of each batch, while its last items are still in flight.
    assert waiting == 8.6
    assert waiting_source.started_at_read == [0, 100, 200, 300, 400]


async def test_a_batch_read_ahead_while_the_run_is_cancelled_is_accounted_unsent() -> None:
    clock = FakeClock()
    provider = FakeProviderFactory(latency=0.1, thread_safety=THREAD_SAFE)
    source = _SlowSource(1000, clock, 1.0, lambda: len(provider.calls))
    h = Harness(clock=clock, source=source)
    options = EngineOptions(read_batch_size=100, read_low_water=100)
    handle = await h.start(provider, _concurrent(10), options)
    # At 1.5 s the first batch is being sent and the second is being read ahead.
    await clock.advance(1.5)
    assert source.reads == 1
    assert len(source.started_at_read) == 2
    await handle.submit(CancelRun("stop-1", "enough"))
    summary = await clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    # The batch that arrived after the cancel was never sent, yet every recipient has one result.
    assert summary.total == 1000
    assert summary.succeeded + summary.unknown < 200
    assert summary.unsent >= 800
    assert_accounted(summary, h)
