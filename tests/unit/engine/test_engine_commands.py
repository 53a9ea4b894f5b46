"""Run commands: pause, resume, cancel and concurrency changes, racing each other and in-flight sends."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from wepush.agent.engine import (
    ArtifactRef,
    CancelRun,
    ChangeConcurrency,
    CommandCode,
    ConcurrencyPolicy,
    Counts,
    ErrorCategory,
    ItemState,
    PausePolicy,
    PauseRun,
    PauseTimeoutAction,
    ProviderResult,
    RateLimitPolicy,
    ResumeRun,
    RunCommand,
    RunEventType,
    RunExecutionSpec,
    RunState,
    ThreadSafetyMode,
    TimeoutPolicy,
)
from wepush.agent.engine.testing import InMemoryArtifactSink
from wepush.agent.providers.fake import FakeProviderFactory, Hang

from .support import Harness, assert_accounted, policies, spec, state_of

THREAD_SAFE = ThreadSafetyMode.THREAD_SAFE


def _wide(target: int = 4, **others: Any) -> RunExecutionSpec:
    return spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=32, target=target), **others))


async def test_concurrency_raised_and_lowered_mid_run_loses_and_duplicates_nothing() -> None:
    h = Harness(count=600)
    provider = FakeProviderFactory(latency=1.0, thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _wide(4))
    await h.clock.advance(3.5)
    assert provider.stats.active == 4

    raised = await handle.submit(ChangeConcurrency("up", 16))
    assert raised.accepted
    assert handle.effective_concurrency == 16
    await h.clock.advance(0)
    assert provider.stats.active == 16  # new permits are granted at once
    await h.clock.advance(5)

    lowered = await handle.submit(ChangeConcurrency("down", 2))
    assert lowered.accepted
    assert provider.stats.active == 16  # in-flight calls are not interrupted...
    await h.clock.advance(1.0)
    assert provider.stats.active == 2  # ...the gate shrinks as they finish

    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert sorted(r.item_id for r in provider.calls) == sorted(f"item-{i:07d}" for i in range(1, 601))
    assert {item for item, n in h.results.item_ids.items() if n == 1} == {
        f"item-{i:07d}" for i in range(1, 601)
    }
    changes = h.events.of_type(RunEventType.CONCURRENCY_CHANGED)
    assert [(e.data["target"], e.data["effective"]) for e in changes] == [(16, 16), (2, 2)]
    assert_accounted(summary, h)


async def test_out_of_range_concurrency_is_rejected_with_the_allowed_range() -> None:
    h = Harness(count=10)
    handle = await h.start(FakeProviderFactory(latency=1), _wide(4))
    result = await handle.submit(ChangeConcurrency("c-1", 33))
    assert not result.accepted
    assert result.code == CommandCode.CONCURRENCY_OUT_OF_RANGE
    assert result.allowed_range == (1, 32)
    assert handle.effective_concurrency == 4
    assert (await handle.submit(ChangeConcurrency("c-2", 0))).allowed_range == (1, 32)
    assert h.events.of_type(RunEventType.CONCURRENCY_CHANGED) == []
    await h.clock.run(handle.completion())


async def test_a_repeated_command_id_returns_the_first_result_and_acts_once() -> None:
    h = Harness(count=50)
    handle = await h.start(FakeProviderFactory(latency=1, thread_safety=THREAD_SAFE), _wide(4))
    first = await handle.submit(ChangeConcurrency("same-id", 8))
    again = await handle.submit(ChangeConcurrency("same-id", 2))
    assert again is first
    assert handle.effective_concurrency == 8
    pause = await handle.submit(PauseRun("p"))
    assert await handle.submit(PauseRun("p")) is pause
    await handle.submit(ResumeRun("r"))
    await h.clock.advance(0)
    acks = [e.data["commandId"] for e in h.events.of_type(RunEventType.COMMAND_ACKNOWLEDGED)]
    assert acks == ["same-id", "p", "r"]
    assert len(h.events.of_type(RunEventType.RUN_PAUSED)) == 1
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED


async def test_pause_lets_in_flight_finish_and_dispatches_nothing_until_resumed() -> None:
    h = Harness(count=40)
    provider = FakeProviderFactory(latency=2.0, thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _wide(4))
    await h.clock.advance(1.0)
    assert (await handle.submit(PauseRun("p1"))).accepted
    assert handle.state is RunState.PAUSED
    calls_at_pause = len(provider.calls)
    await h.clock.advance(1.5)  # the four in-flight calls finish while paused
    assert handle.counts().succeeded == 4
    await h.clock.advance(600)
    assert len(provider.calls) == calls_at_pause
    assert handle.counts().in_flight == 0

    assert (await handle.submit(ResumeRun("r1"))).accepted
    assert state_of(handle) is RunState.RUNNING
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    types = h.events.types()
    assert types.index(RunEventType.RUN_PAUSED) < types.index(RunEventType.RUN_RESUMED)
    assert_accounted(summary, h)


async def test_cancel_records_undispatched_items_as_unsent_and_in_flight_as_unknown() -> None:
    h = Harness(count=100)
    provider = FakeProviderFactory(default=Hang(), thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _wide(5))
    await h.clock.advance(1)
    assert provider.stats.active == 5
    result = await handle.submit(CancelRun("stop", "operator request"))
    assert result.accepted
    assert handle.state is RunState.CANCELLING
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert summary.unknown == 5  # the cancelled in-flight calls may or may not have been delivered
    assert summary.unsent == 95
    assert summary.failed == 0
    unknown = [r for r in h.results.results.values() if r.state is ItemState.UNKNOWN]
    assert {r.error_category for r in unknown} == {ErrorCategory.CANCELLED}
    cancelling = h.events.of_type(RunEventType.RUN_CANCELLING)
    assert cancelling[0].data["reason"] == "operator request"
    assert_accounted(summary, h)


async def test_cancel_waits_for_the_item_deadline_of_a_provider_that_ignores_cancellation() -> None:
    h = Harness(count=3)
    provider = FakeProviderFactory(default=Hang(), honour_cancellation=False, thread_safety=THREAD_SAFE)
    run_spec = _wide(3, timeout=TimeoutPolicy(item=timedelta(seconds=30)))
    handle = await h.start(provider, run_spec)
    await h.clock.advance(1)
    await handle.submit(CancelRun("c"))
    await h.clock.advance(28)
    assert handle.state is RunState.CANCELLING
    summary = await h.clock.run(handle.completion())
    assert (summary.ended_at - summary.started_at).total_seconds() == 30
    assert {r.provider_code for r in h.results.results.values()} == {"ITEM_DEADLINE_EXCEEDED"}
    assert summary.unknown == 3
    assert summary.final_state is RunState.CANCELLED


async def test_pause_resume_and_cancel_racing_in_one_tick_end_cancelled_and_consistent() -> None:
    h = Harness(count=200)
    provider = FakeProviderFactory(latency=0.5, thread_safety=THREAD_SAFE)
    handle = await h.start(provider, _wide(8))
    await h.clock.advance(2.25)
    results = [
        await handle.submit(PauseRun("p")),
        await handle.submit(ChangeConcurrency("c", 16)),
        await handle.submit(ResumeRun("r")),
        await handle.submit(CancelRun("x")),
        await handle.submit(PauseRun("p2")),
        await handle.submit(ResumeRun("r2")),
        await handle.submit(CancelRun("x2")),
    ]
    assert [r.accepted for r in results] == [True, True, True, True, False, False, True]
    assert results[4].code == CommandCode.RUN_STATE_CONFLICT
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert summary.succeeded >= 32
    assert summary.unsent > 0
    late = await handle.submit(ResumeRun("late"))
    assert late.code == CommandCode.RUN_STATE_CONFLICT
    types = h.events.types()
    assert types.index(RunEventType.RUN_PAUSED) < types.index(RunEventType.RUN_RESUMED)
    assert types.index(RunEventType.RUN_RESUMED) < types.index(RunEventType.RUN_CANCELLING)
    assert types[-1] is RunEventType.RUN_COMPLETED
    assert_accounted(summary, h)


async def test_commands_interleaved_with_sends_never_lose_or_duplicate_items() -> None:
    h = Harness(count=300)
    provider = FakeProviderFactory(
        latency=lambda r: 0.1 + (r.recipient.sequence % 7) / 10, thread_safety=THREAD_SAFE
    )
    handle = await h.start(provider, _wide(6))
    script: list[RunCommand] = [
        PauseRun("a"),
        ChangeConcurrency("b", 12),
        ResumeRun("c"),
        PauseRun("d"),
        ChangeConcurrency("e", 3),
    ]
    script += [ResumeRun("f"), ChangeConcurrency("g", 20), PauseRun("h"), ResumeRun("i")]
    for command in script:
        await h.clock.advance(0.37)
        assert (await handle.submit(command)).accepted
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert len(provider.calls) == 300
    assert_accounted(summary, h)


async def test_cancel_while_paused_finishes_cancelled() -> None:
    h = Harness(count=20)
    handle = await h.start(FakeProviderFactory(latency=1, thread_safety=THREAD_SAFE), _wide(2))
    await h.clock.advance(1.5)
    await handle.submit(PauseRun("p"))
    await h.clock.advance(5)
    await handle.submit(CancelRun("c"))
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert summary.succeeded == 4
    assert summary.unsent == 16
    assert_accounted(summary, h)


async def test_pause_longer_than_max_pause_duration_cancels_or_resumes_per_policy() -> None:
    cancel_policy = PausePolicy(
        max_pause_duration=timedelta(minutes=10), on_pause_timeout=PauseTimeoutAction.CANCEL
    )
    h = Harness(count=20)
    handle = await h.start(FakeProviderFactory(latency=1), _wide(2, pause=cancel_policy))
    await h.clock.advance(2.5)
    await handle.submit(PauseRun("p"))
    await h.clock.advance(599)
    assert handle.state is RunState.PAUSED
    await h.clock.advance(2)
    assert handle.state in (RunState.CANCELLING, RunState.CANCELLED)
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert_accounted(summary, h)

    resume_policy = PausePolicy(
        max_pause_duration=timedelta(minutes=1), on_pause_timeout=PauseTimeoutAction.RESUME
    )
    h2 = Harness(count=20)
    handle2 = await h2.start(FakeProviderFactory(latency=1), _wide(2, pause=resume_policy))
    await h2.clock.advance(1.5)
    await handle2.submit(PauseRun("p"))
    await h2.clock.advance(61)
    assert handle2.state is RunState.RUNNING
    resumed = h2.events.of_type(RunEventType.RUN_RESUMED)
    assert resumed[0].data["cause"] == "PAUSE_TIMEOUT"
    summary2 = await h2.clock.run(handle2.completion())
    assert summary2.final_state is RunState.SUCCEEDED


async def test_resume_of_a_manual_pause_disarms_the_pause_timeout() -> None:
    policy = PausePolicy(max_pause_duration=timedelta(seconds=30), on_pause_timeout=PauseTimeoutAction.CANCEL)
    h = Harness(count=60)
    handle = await h.start(FakeProviderFactory(latency=1), _wide(1, pause=policy))
    await handle.submit(PauseRun("p1"))
    await h.clock.advance(20)
    await handle.submit(ResumeRun("r1"))
    await h.clock.advance(5)
    await handle.submit(PauseRun("p2"))
    await h.clock.advance(20)  # 45s after the first pause, 20s into the second
    await handle.submit(ResumeRun("r2"))
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED


async def test_commands_after_the_auth_circuit_opened_cannot_strand_winding_down_items() -> None:
    h = Harness(count=20)
    denied = ProviderResult.failure(ErrorCategory.AUTHENTICATION, "401")
    provider = FakeProviderFactory(
        outcome=lambda r: denied if r.recipient.sequence <= 3 else ProviderResult.ok(),
        latency=lambda r: 0.1 if r.recipient.sequence <= 3 else 5.0,
        thread_safety=THREAD_SAFE,
    )
    handle = await h.start(provider, _wide(4))
    await h.clock.advance(1)
    paused = await handle.submit(PauseRun("p"))
    assert not paused.accepted
    assert paused.code == CommandCode.RUN_STATE_CONFLICT
    assert (await handle.submit(CancelRun("c"))).accepted
    summary = await h.clock.run(handle.completion())
    # Calls already in flight when the circuit opened were allowed to finish (and succeeded).
    assert summary.final_state is RunState.PARTIAL
    assert summary.failed == 3
    assert summary.succeeded == len(provider.calls) - 3 > 0
    assert summary.unsent == 20 - len(provider.calls)
    assert h.events.events[-1].data["stopReason"] == "AUTH_CIRCUIT_OPEN"
    assert_accounted(summary, h)


class _HeldArtifacts(InMemoryArtifactSink):
    """Artifacts whose closing waits for the test: the run stays in its finishing window meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = asyncio.Event()
        self.release = asyncio.Event()

    async def close(self) -> tuple[ArtifactRef, ...]:
        self.closing.set()
        await self.release.wait()
        return await super().close()


async def test_a_command_arriving_while_the_run_finishes_says_so() -> None:
    """Every item has its outcome and the final state is being written: the run still reads RUNNING, but
    a pause is refused as "finishing", not with "run is RUNNING", a state that allows pausing."""
    artifacts = _HeldArtifacts()
    h = Harness(count=3, artifacts=artifacts)
    handle = await h.start(FakeProviderFactory(latency=1.0))
    await h.clock.advance(5)
    await asyncio.wait_for(artifacts.closing.wait(), 10)
    assert handle.state is RunState.RUNNING

    refused = await handle.submit(PauseRun("late-pause"))
    artifacts.release.set()
    summary = await h.clock.run(handle.completion())

    assert (refused.accepted, refused.code) == (False, CommandCode.RUN_STATE_CONFLICT)
    assert refused.message == "run is finishing"
    assert summary.final_state is RunState.SUCCEEDED


def _counted(counts: Counts) -> int:
    finished = counts.succeeded + counts.failed + counts.unknown + counts.unsent + counts.skipped
    return counts.pending + counts.in_flight + finished


async def test_a_paused_rate_limited_run_shows_nothing_in_flight_once_its_calls_finish() -> None:
    """Items taken by workers but still waiting for a rate-limit token when the run is paused are not
    being sent: once the calls that were at the provider finish, the run shows 0 in flight (they count as
    pending, in the counts and in the progress events) and the provider gets no further call."""
    h = Harness(count=300)
    provider = FakeProviderFactory(latency=0.02, thread_safety=THREAD_SAFE)
    run_spec = _wide(10, rate_limit=RateLimitPolicy(permits_per_second=100, burst=1))
    handle = await h.start(provider, run_spec)
    await h.clock.advance(1.005)
    assert (await handle.submit(PauseRun("p"))).accepted
    await h.clock.advance(0.1)  # the calls at the provider when the run paused have finished
    calls = len(provider.calls)
    await h.clock.advance(8)

    counts = handle.counts()
    assert len(provider.calls) == calls  # a paused run sends nothing
    assert counts.succeeded == calls
    assert counts.in_flight == 0
    assert counts.pending == 300 - calls
    assert _counted(counts) == counts.total == 300
    progress = h.events.of_type(RunEventType.PROGRESS)[-1]
    assert progress.data["state"] == RunState.PAUSED.value
    assert (progress.data["inFlight"], progress.data["pending"]) == (0, 300 - calls)
    paused = h.events.of_type(RunEventType.RUN_PAUSED)[0]
    # The pause reports the calls at the provider, not the items waiting for a token.
    assert paused.data["inFlight"] <= 2

    assert (await handle.submit(ResumeRun("r"))).accepted
    await h.clock.advance(0)
    assert _counted(handle.counts()) == 300
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert len(provider.calls) == 300
    assert_accounted(summary, h)


async def test_a_retry_waiting_out_a_pause_counts_as_pending_not_in_flight() -> None:
    h = Harness(count=6)
    busy = ProviderResult.failure(ErrorCategory.TEMPORARY_REMOTE, "busy")
    provider = FakeProviderFactory(
        by_sequence={1: [busy, ProviderResult.ok()], 2: [busy, ProviderResult.ok()]},
        latency=0.5,
        thread_safety=THREAD_SAFE,
    )
    handle = await h.start(provider, _wide(2))
    # Items 1 and 2 failed once at 0.5s and back off for 1s; items 3 and 4 are at the provider.
    await h.clock.advance(0.6)
    assert (await handle.submit(PauseRun("p"))).accepted
    await h.clock.advance(0)
    counts = handle.counts()
    assert (counts.in_flight, counts.pending) == (2, 4)
    await h.clock.advance(30)
    assert len(provider.calls) == 4  # items 3 and 4 finished; no retry while paused
    counts = handle.counts()
    assert (counts.in_flight, counts.pending, counts.succeeded) == (0, 4, 2)
    progress = h.events.of_type(RunEventType.PROGRESS)[-1]
    assert (progress.data["inFlight"], progress.data["pending"]) == (0, 4)

    assert (await handle.submit(ResumeRun("r"))).accepted
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.SUCCEEDED
    assert summary.retried == 2
    assert_accounted(summary, h)
