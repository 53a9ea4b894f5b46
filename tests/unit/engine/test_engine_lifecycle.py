"""Shutdown order, close failures, sink failures, secrets and session thread-safety modes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from wepush.agent.engine import (
    CancelRun,
    ConcurrencyPolicy,
    EngineOptions,
    ErrorCategory,
    ItemResult,
    JsonlArtifactSink,
    PauseRun,
    ProviderOpenContext,
    ProviderResult,
    RecipientRecord,
    ResumeRun,
    RunEventType,
    RunExecutionSpec,
    RunState,
    SystemClock,
    ThreadSafetyMode,
    TimeoutPolicy,
)
from wepush.agent.engine.testing import InMemoryEventSink, InMemoryRecipientSource, InMemoryResultSink
from wepush.agent.providers.fake import FakeProviderFactory, FakeSession, Hang

from .support import TOKEN_REF, TOKEN_VALUE, Harness, assert_accounted, policies, spec


def _concurrent(target: int) -> RunExecutionSpec:
    return spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=32, target=target)))


class _Log:
    def __init__(self) -> None:
        self.steps: list[str] = []


class _LoggingResults(InMemoryResultSink):
    def __init__(self, log: _Log) -> None:
        super().__init__()
        self.log = log

    async def flush(self) -> None:
        self.log.steps.append("results.flush")
        await super().flush()


class _LoggingEvents(InMemoryEventSink):
    def __init__(self, log: _Log) -> None:
        super().__init__()
        self.log = log

    async def flush(self) -> None:
        self.log.steps.append("events.flush")
        await super().flush()


class _LoggingSource(InMemoryRecipientSource):
    def __init__(self, log: _Log, count: int) -> None:
        super().__init__(count)
        self.log = log

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        batch = await super().next_batch(max_items)
        if not batch:
            self.log.steps.append("source.exhausted")
        return batch

    async def close(self) -> None:
        self.log.steps.append("source.close")
        await super().close()


class _LoggingProvider(FakeProviderFactory):
    def __init__(self, log: _Log, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log

    async def open(self, context: ProviderOpenContext) -> FakeSession:
        session = await super().open(context)
        log = self.log
        original = session.close

        async def close() -> None:
            log.steps.append("provider.close")
            await original()

        session.close = close  # type: ignore[method-assign]
        return session


async def test_shutdown_runs_in_the_seed_order() -> None:
    log = _Log()
    h = Harness(results=_LoggingResults(log), events=_LoggingEvents(log), source=_LoggingSource(log, 5))
    summary = await h.run(_LoggingProvider(log, latency=0.5))
    assert log.steps == [
        "source.exhausted",
        "results.flush",
        "events.flush",
        "provider.close",
        "source.close",
    ]
    assert summary.final_state is RunState.SUCCEEDED
    assert h.events.closed
    assert h.results.closed


async def test_close_failures_are_collected_and_do_not_stop_other_closes() -> None:
    source = InMemoryRecipientSource(4, close_error=OSError("disk gone"))
    h = Harness(source=source, events=InMemoryEventSink(close_error=RuntimeError("socket closed")))
    provider = FakeProviderFactory(close_error=RuntimeError("logout failed secret=abc123xyz"))
    summary = await h.run(provider)
    codes = [e.code for e in summary.suppressed_errors]
    assert codes == ["PROVIDER_CLOSE_FAILED", "SOURCE_CLOSE_FAILED", "EVENT_SINK_CLOSE_FAILED"]
    assert all("abc123xyz" not in e.message for e in summary.suppressed_errors)
    assert source.closed
    assert summary.final_state is RunState.SUCCEEDED
    assert_accounted(summary, h)


async def test_temporary_result_sink_failures_are_retried_without_loss_or_duplicates() -> None:
    h = Harness(count=1200)
    h.results.fail_appends(2, partial=True)
    summary = await h.run(FakeProviderFactory(thread_safety=ThreadSafetyMode.THREAD_SAFE))
    assert h.results.append_failures == 2
    assert h.results.duplicates_ignored > 0  # the partly stored batch was appended again
    assert summary.suppressed_errors == ()
    assert summary.final_state is RunState.SUCCEEDED
    assert_accounted(summary, h)


async def test_a_result_sink_that_keeps_failing_stops_the_run_and_is_reported() -> None:
    h = Harness(count=3000)
    h.results.fail_appends(10_000)
    provider = FakeProviderFactory(thread_safety=ThreadSafetyMode.THREAD_SAFE)
    options = EngineOptions(result_batch_size=100, result_high_water=200, sink_retry_attempts=3)
    summary = await h.run(provider, _concurrent(4), options)
    # Backpressure held dispatch while the sink was retried; once it gave up, the rest stayed unsent.
    assert len(provider.calls) < 1000
    assert [e.code for e in summary.suppressed_errors][:1] == ["RESULT_SINK_FAILED"]
    assert summary.final_state in (RunState.FAILED, RunState.PARTIAL)
    assert summary.unsent > 0
    assert summary.total == 3000
    assert h.events.events[-1].data["stopReason"] == "RESULT_SINK_FAILED"


async def test_temporary_event_sink_failures_lose_no_event_and_keep_sequences_contiguous() -> None:
    h = Harness(count=30)
    h.events.fail_publishes(3)
    h.events.fail_flushes(1)
    provider = FakeProviderFactory(
        latency=0.4, by_sequence={4: ProviderResult.failure(ErrorCategory.RECIPIENT_INVALID, "BAD")}
    )
    summary = await h.run(provider)
    assert h.events.publish_failures == 3
    events = h.events.events
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert events[0].type is RunEventType.RUN_STARTED
    assert events[-1].type is RunEventType.RUN_COMPLETED
    assert len(h.events.of_type(RunEventType.ITEM_ERROR)) == 1
    assert summary.suppressed_errors == ()


async def test_item_error_events_are_capped_and_the_rest_are_counted() -> None:
    h = Harness(count=50)
    provider = FakeProviderFactory(default=ProviderResult.failure(ErrorCategory.RECIPIENT_INVALID, "BAD"))
    summary = await h.run(provider, None, EngineOptions(item_error_event_limit=10))
    assert len(h.events.of_type(RunEventType.ITEM_ERROR)) == 10
    assert h.events.events[-1].data["itemErrorEventsSuppressed"] == 40
    assert summary.failed == 50


async def test_secrets_are_zeroed_when_the_run_ends_even_if_the_provider_forgets() -> None:
    h = Harness(count=2)
    provider = FakeProviderFactory(secret=TOKEN_REF)
    handle = await h.start(provider)
    session = provider.sessions[0]
    secret = session.secret
    assert secret is not None
    assert secret.copy_str() == TOKEN_VALUE
    assert TOKEN_VALUE not in repr(session.context)
    session.secret = None  # the provider "forgets" to close it
    await h.clock.run(handle.completion())
    assert secret.closed
    assert bytes(secret._buffer) == bytes(len(TOKEN_VALUE))
    assert repr(secret) == "SecretValue(******)"


async def test_serialized_sessions_are_never_called_concurrently() -> None:
    h = Harness(count=40)
    provider = FakeProviderFactory(latency=1.0, thread_safety=ThreadSafetyMode.SERIALIZED)
    summary = await h.run(provider, _concurrent(8))
    assert provider.sessions[0].stats.peak == 1
    assert summary.succeeded == 40
    assert (summary.ended_at - summary.started_at).total_seconds() == 40


async def test_thread_safe_sessions_are_called_concurrently() -> None:
    h = Harness(count=40)
    provider = FakeProviderFactory(latency=1.0, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    summary = await h.run(provider, _concurrent(8))
    assert provider.sessions[0].stats.peak == 8
    assert (summary.ended_at - summary.started_at).total_seconds() == 5


async def test_session_per_worker_gives_each_concurrent_call_its_own_sub_session() -> None:
    h = Harness(count=40)
    provider = FakeProviderFactory(latency=1.0, thread_safety=ThreadSafetyMode.SESSION_PER_WORKER)
    summary = await h.run(provider, _concurrent(8))
    root = provider.sessions[0]
    assert root.stats.peak == 0
    assert len(root.workers) == 8
    assert all(w.stats.peak == 1 for w in root.workers)
    assert all(w.closed for w in root.workers)
    assert root.closed
    assert summary.succeeded == 40


async def test_a_source_that_fails_mid_read_ends_the_run_partial_with_the_error_kept() -> None:
    h = Harness(source=InMemoryRecipientSource(2000, fail_after=1000))
    summary = await h.run(FakeProviderFactory(thread_safety=ThreadSafetyMode.THREAD_SAFE))
    assert summary.total == 1000
    assert summary.final_state is RunState.PARTIAL
    assert [e.code for e in summary.suppressed_errors] == ["SOURCE_READ_FAILED"]


async def test_jsonl_artifacts_are_written_per_outcome(tmp_path: Path) -> None:
    bad = ProviderResult.failure(ErrorCategory.RECIPIENT_INVALID, "BAD")
    h = Harness(count=5, artifacts=JsonlArtifactSink(tmp_path))
    # Real file I/O runs in threads, which a fake clock cannot wait for; nothing here sleeps, so the
    # system clock is used and the run completes without waiting on time.
    ports = dataclasses.replace(h.ports, clock=SystemClock())
    handle = await h.engine(FakeProviderFactory(by_sequence={2: bad})).start(spec(), ports)
    summary = await handle.completion()
    names = {a.name: a for a in summary.artifacts}
    assert set(names) == {"success.jsonl", "failed.jsonl"}
    assert names["success.jsonl"].record_count == 4
    failed_lines = (tmp_path / "failed.jsonl").read_text().splitlines()
    assert json.loads(failed_lines[0])["itemId"] == "item-0000002"
    assert not (tmp_path / "unsent.jsonl").exists()
    assert names["failed.jsonl"].size_bytes == (tmp_path / "failed.jsonl").stat().st_size
    assert isinstance(h.results.results[("item-0000002", 1)], ItemResult)


async def test_waiting_for_a_serialized_session_does_not_count_against_the_item_deadline() -> None:
    h = Harness(count=16)
    run_spec = spec(
        policy=policies(
            concurrency=ConcurrencyPolicy(min=1, max=32, target=8),
            timeout=TimeoutPolicy(item=timedelta(seconds=15)),
        )
    )
    provider = FakeProviderFactory(latency=10.0, thread_safety=ThreadSafetyMode.SERIALIZED)
    summary = await h.run(provider, run_spec)
    assert summary.succeeded == 16
    assert (summary.ended_at - summary.started_at).total_seconds() == 160


async def test_progress_is_coalesced_while_the_event_sink_is_down_and_nothing_else_is_lost() -> None:
    h = Harness(count=250)
    h.events.fail_publishes(40)
    provider = FakeProviderFactory(
        latency=1.0, by_sequence={7: ProviderResult.failure(ErrorCategory.PERMANENT_REMOTE, "GONE")}
    )
    handle = await h.start(provider, _concurrent(1))
    await h.clock.advance(20)
    await handle.submit(PauseRun("p"))
    await handle.submit(ResumeRun("r"))
    summary = await h.clock.run(handle.completion())
    assert h.events.publish_failures == 40
    events = h.events.events
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    progress = h.events.of_type(RunEventType.PROGRESS)
    assert len(progress) < (summary.ended_at - summary.started_at).total_seconds() / 2
    for kept in (RunEventType.ITEM_ERROR, RunEventType.RUN_PAUSED, RunEventType.RUN_RESUMED):
        assert len(h.events.of_type(kept)) == 1
    assert events[-2].type is RunEventType.PROGRESS
    assert events[-2].data["failed"] == 1
    assert events[-1].type is RunEventType.RUN_COMPLETED
    assert summary.suppressed_errors == ()


async def test_a_progress_update_dropped_over_the_event_bound_is_sent_again_though_counts_hold() -> None:
    """Counts that stop changing (a paused or stuck run) must still reach the sink: a progress event that
    the full buffer dropped is not taken for sent."""
    h = Harness(count=21)
    h.events.fail_publishes(4)  # the sink is down until t=3s, RUN_STARTED waiting to be published
    gone = ProviderResult.failure(ErrorCategory.PERMANENT_REMOTE, "GONE")
    provider = FakeProviderFactory(
        latency=0.5,
        by_sequence={**dict.fromkeys(range(1, 21), gone), 21: Hang()},
        thread_safety=ThreadSafetyMode.THREAD_SAFE,
    )
    options = EngineOptions(event_buffer_size=16)
    handle = await h.start(provider, _concurrent(20), options)
    await h.clock.advance(1.5)  # 20 ITEM_ERRORs fill the buffer; the first progress (at 1s) is dropped
    assert not h.events.of_type(RunEventType.PROGRESS)
    await h.clock.advance(10)  # the sink is back; the counts have not changed since 0.5s
    progress = h.events.of_type(RunEventType.PROGRESS)
    assert progress
    assert (progress[-1].data["failed"], progress[-1].data["inFlight"]) == (20, 1)
    await handle.submit(CancelRun("c"))
    summary = await h.clock.run(handle.completion())
    assert summary.final_state is RunState.CANCELLED
    assert_accounted(summary, h)


def test_importing_the_engine_loads_no_server_provider_or_io_library() -> None:
    code = (
        "import sys, wepush.agent.engine, wepush.agent.engine.testing\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in {'grpc','sqlalchemy','httpx','aiohttp'}"
        " or m.startswith(('wepush.server','wepush.agent.runtime','wepush.agent.providers'))]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
