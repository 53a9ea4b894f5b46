"""The dispatch fence: the engine has every record covered before a provider sees it, asks only about
records it starts (not those read ahead), asks nothing while paused, and stops when a record cannot be
covered. Everything runs on the fake clock."""

from __future__ import annotations

import dataclasses

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ErrorCategory,
    ItemState,
    PauseRun,
    ProviderResult,
    ProviderSendRequest,
    ResumeRun,
    RunEventType,
    RunExecutionSpec,
    RunHandle,
    RunState,
    ThreadSafetyMode,
)
from wepush.agent.engine.testing import FakeClock, ScriptedFailure
from wepush.agent.providers.fake import FakeProviderFactory

from .support import Harness, assert_accounted, policies, spec

THREAD_SAFE = ThreadSafetyMode.THREAD_SAFE


class RecordingFence:
    """A ``DispatchFence`` that covers exactly what it is asked to, each write taking ``write_seconds`` on
    the fake clock; from ``fail_from`` on, writes fail."""

    def __init__(
        self, clock: FakeClock, *, write_seconds: float = 0.01, fail_from: int | None = None
    ) -> None:
        self._clock = clock
        self._write_seconds = write_seconds
        self._fail_from = fail_from
        self.mark = 0
        self.asked: list[int] = []
        self.covered: list[int] = []

    def covers(self, sequence: int) -> bool:
        self.asked.append(sequence)
        return sequence <= self.mark

    async def cover(self, sequence: int) -> None:
        self.covered.append(sequence)
        await self._clock.sleep(self._write_seconds)
        if self._fail_from is not None and sequence >= self._fail_from:
            raise ScriptedFailure("the mark could not be stored")
        self.mark = max(self.mark, sequence)


class Sent:
    """Each first provider call's sequence and the fence's mark at that moment, and the sequences retried;
    the first attempt of each sequence in ``busy`` fails with a retryable error."""

    def __init__(self, fence: RecordingFence, busy: frozenset[int] = frozenset()) -> None:
        self._fence = fence
        self._busy = busy
        self.calls: list[tuple[int, int]] = []
        self.retries: list[int] = []

    def __call__(self, request: ProviderSendRequest) -> ProviderResult:
        sequence = request.recipient.sequence
        if request.attempt == 1:
            self.calls.append((sequence, self._fence.mark))
        else:
            self.retries.append(sequence)
        if sequence in self._busy and request.attempt == 1:
            return ProviderResult.failure(ErrorCategory.TEMPORARY_REMOTE, "503")
        return ProviderResult.ok()

    @property
    def highest(self) -> int:
        return max(sequence for sequence, _ in self.calls)


def _concurrent(target: int) -> RunExecutionSpec:
    return spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=32, target=target)))


async def _start(h: Harness, fence: RecordingFence, provider: FakeProviderFactory, target: int) -> RunHandle:
    ports = dataclasses.replace(h.ports, dispatch_fence=fence)
    return await h.engine(provider).start(_concurrent(target), ports)


async def test_every_record_is_covered_before_the_provider_sees_it_and_never_the_records_read_ahead() -> None:
    # The run QA crashed: 3,003 recipients, ten at a time, 0.2 s per answer; one item is retried.
    h = Harness(count=3003)
    fence = RecordingFence(h.clock)
    sent = Sent(fence, busy=frozenset({5}))
    provider = FakeProviderFactory(outcome=sent, latency=0.2, thread_safety=THREAD_SAFE)
    handle = await _start(h, fence, provider, 10)

    await h.clock.advance(7.5)
    assert h.source is not None
    assert 350 <= len(sent.calls) <= 400
    # A thousand records and more are read ahead, yet the mark stays with what was started: at most the
    # ten holding a permit lie between the last record a provider saw and the mark.
    assert h.source.emitted >= 1000
    assert sent.highest <= fence.mark <= sent.highest + 10

    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert_accounted(summary, h)
    assert all(sequence <= mark for sequence, mark in sent.calls)
    assert all(mark <= sequence + 10 for sequence, mark in sent.calls)
    # Once per record, the retried one included: a retry was covered by its first attempt.
    assert sorted(fence.asked) == list(range(1, 3004))
    assert sent.retries == [5]


async def test_a_paused_run_asks_the_fence_nothing_and_its_mark_stays_where_dispatch_stopped() -> None:
    h = Harness(count=200)
    fence = RecordingFence(h.clock)
    sent = Sent(fence)
    provider = FakeProviderFactory(outcome=sent, latency=1.0, thread_safety=THREAD_SAFE)
    handle = await _start(h, fence, provider, 4)
    await h.clock.advance(3.5)
    assert (await handle.submit(PauseRun("p1"))).accepted
    await h.clock.advance(2)  # the calls in flight end while paused
    asked, covered, mark = len(fence.asked), len(fence.covered), fence.mark
    assert mark == sent.highest

    await h.clock.advance(600)
    assert (len(fence.asked), len(fence.covered), fence.mark) == (asked, covered, mark)
    assert sent.highest == mark

    assert (await handle.submit(ResumeRun("r1"))).accepted
    summary = await h.clock.run(handle.completion())
    assert summary.succeeded == 200
    assert fence.mark == 200
    assert all(sequence <= mark for sequence, mark in sent.calls)


async def test_a_record_that_cannot_be_covered_is_not_sent_and_the_run_stops_as_on_a_failed_read() -> None:
    h = Harness(count=100)
    fence = RecordingFence(h.clock, fail_from=41)
    sent = Sent(fence)
    provider = FakeProviderFactory(outcome=sent, latency=0.5, thread_safety=THREAD_SAFE)
    handle = await _start(h, fence, provider, 4)

    summary = await h.clock.run(handle.completion())

    assert [s for s, _ in sent.calls] == list(range(1, 41))
    assert all(sequence <= mark for sequence, mark in sent.calls)
    assert summary.final_state is RunState.PARTIAL
    assert summary.succeeded == 40
    assert summary.unsent == summary.total - 40
    assert [e.code for e in summary.suppressed_errors] == ["DISPATCH_MARK_FAILED"]
    completed = h.events.of_type(RunEventType.RUN_COMPLETED)[-1]
    assert completed.data["stopReason"] == "SOURCE_FAILED"
    assert h.results.states()[ItemState.UNSENT] == summary.unsent
    assert_accounted(summary, h)
