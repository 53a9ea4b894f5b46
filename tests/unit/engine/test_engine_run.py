"""End-to-end runs on the fake clock: outcomes, streaming, progress events and effective concurrency."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from wepush.agent.engine import REDACTION_MASK as MASK
from wepush.agent.engine import (
    ConcurrencyPolicy,
    EngineOptions,
    ErrorCategory,
    ItemState,
    JsonlArtifactSink,
    ProviderCapabilities,
    ProviderResult,
    ResultPolicy,
    RunEventType,
    RunState,
    SecretMasker,
    SystemClock,
    ThreadSafetyMode,
)
from wepush.agent.providers.fake import FakeProviderFactory

from .support import Harness, assert_accounted, policies, spec


async def test_empty_audience_succeeds_with_zero_counts() -> None:
    h = Harness(count=0)
    provider = FakeProviderFactory()
    summary = await h.run(provider)
    assert summary.final_state is RunState.SUCCEEDED
    assert (summary.total, summary.succeeded, summary.retried) == (0, 0, 0)
    assert provider.calls == []
    assert h.events.types() == [RunEventType.RUN_STARTED, RunEventType.PROGRESS, RunEventType.RUN_COMPLETED]
    assert h.source is not None
    assert h.source.closed
    assert provider.sessions[0].closed
    assert_accounted(summary, h)


async def test_one_item_is_sent_once_and_recorded_with_timings() -> None:
    h = Harness(count=1)
    provider = FakeProviderFactory(
        latency=0.25, default=ProviderResult.ok("202", external_request_id="ext-1")
    )
    summary = await h.run(provider)
    assert summary.final_state is RunState.SUCCEEDED
    [result] = h.results.results.values()
    assert result.state is ItemState.SUCCEEDED
    assert result.attempt == 1
    assert result.provider_code == "202"
    assert result.external_request_id == "ext-1"
    assert result.latency_ms == 250
    assert result.recipient is not None
    assert result.recipient["address"].value == "user1@example.test"
    [request] = provider.calls
    assert request.idempotency_key == "run-1:item-0000001"
    # The item deadline (2 minutes from the first call at t=0) travels with the request.
    assert request.deadline == summary.started_at + timedelta(minutes=2)
    assert_accounted(summary, h)


async def test_mixed_outcomes_make_a_partial_run_and_all_failures_a_failed_run() -> None:
    h = Harness(count=6)
    bad = ProviderResult.failure(ErrorCategory.RECIPIENT_INVALID, "BAD_ADDRESS", "no such mailbox")
    summary = await h.run(FakeProviderFactory(by_sequence={2: bad, 5: bad}))
    assert summary.final_state is RunState.PARTIAL
    assert (summary.succeeded, summary.failed) == (4, 2)
    assert_accounted(summary, h)

    h2 = Harness(count=3)
    summary2 = await h2.run(FakeProviderFactory(default=bad))
    assert summary2.final_state is RunState.FAILED
    assert summary2.failed == 3
    assert_accounted(summary2, h2)


async def test_a_hundred_thousand_recipients_stream_without_being_held() -> None:
    options = EngineOptions(read_batch_size=500, result_batch_size=500, result_high_water=1000)
    h = Harness(count=100_000)
    provider = FakeProviderFactory(thread_safety=ThreadSafetyMode.THREAD_SAFE)
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=64, target=32)))
    summary = await h.run(provider, run_spec, options)
    assert summary.final_state is RunState.SUCCEEDED
    assert summary.succeeded == 100_000
    assert h.source is not None
    assert h.source.max_batch <= 500
    # Read-ahead is bounded by one read batch + in-flight + the result backlog, never the audience.
    assert h.source.max_outstanding <= 500 + 32 + 1000 + 500
    assert h.results.max_batch <= 500
    assert len(h.results.item_ids) == 100_000
    assert_accounted(summary, h)


async def test_progress_events_are_bounded_by_time_not_by_recipients() -> None:
    h = Harness(count=3000)
    provider = FakeProviderFactory(latency=1.0, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=32, target=30)))
    summary = await h.run(provider, run_spec)
    elapsed = (summary.ended_at - summary.started_at).total_seconds()
    assert elapsed == 100
    progress = h.events.of_type(RunEventType.PROGRESS)
    assert len(progress) <= elapsed / 1.0 + 2
    # The last progress event carries the final full counts and comes right before RUN_COMPLETED.
    assert h.events.events[-2].type is RunEventType.PROGRESS
    assert h.events.events[-2].data["succeeded"] == 3000
    assert h.events.events[-1].type is RunEventType.RUN_COMPLETED
    assert [e.sequence for e in h.events.events] == list(range(1, len(h.events.events) + 1))

    fast = Harness(count=20_000)
    await fast.run(FakeProviderFactory(thread_safety=ThreadSafetyMode.THREAD_SAFE))
    assert len(fast.events.of_type(RunEventType.PROGRESS)) <= 2


async def test_effective_concurrency_is_the_smallest_of_target_job_provider_and_capacity() -> None:
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=10, target=8)))
    provider = FakeProviderFactory(concurrency_limit=5, latency=1, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    h = Harness(count=40)
    handle = await h.start(provider, run_spec)
    assert handle.effective_concurrency == 5
    await h.clock.run(handle.completion())
    assert provider.stats.peak == 5

    h2 = Harness(count=40)
    handle2 = await h2.start(FakeProviderFactory(), run_spec, EngineOptions(capacity=3))
    assert handle2.effective_concurrency == 3
    await h2.clock.run(handle2.completion())

    h3 = Harness(count=40)
    handle3 = await h3.start(FakeProviderFactory(), run_spec, EngineOptions(capacity=3), capacity=2)
    assert handle3.effective_concurrency == 2
    await h3.clock.run(handle3.completion())


async def test_dry_run_skips_items_when_the_provider_cannot_dry_run() -> None:
    h = Harness(count=4)
    provider = FakeProviderFactory(capabilities=ProviderCapabilities(dry_run=False))
    summary = await h.run(provider, spec(dry_run=True))
    assert provider.calls == []
    assert summary.final_state is RunState.SUCCEEDED
    assert summary.skipped == 4
    assert_accounted(summary, h)


async def test_dry_run_is_delegated_to_a_provider_that_supports_it() -> None:
    h = Harness(count=2)
    provider = FakeProviderFactory()
    summary = await h.run(provider, spec(dry_run=True))
    assert provider.sessions[0].context.dry_run is True
    assert {r.provider_code for r in h.results.results.values()} == {"DRY_RUN"}
    assert summary.succeeded == 2


async def test_response_bodies_are_dropped_unless_the_result_policy_keeps_them() -> None:
    body = "é" * 100
    provider = FakeProviderFactory(default=ProviderResult.ok(response_body=body))
    h = Harness(count=1)
    await h.run(provider)
    assert next(iter(h.results.results.values())).response_body is None

    h2 = Harness(count=1)
    keep = spec(policy=policies(result=ResultPolicy(save_response_body=True, response_body_max_bytes=11)))
    await h2.run(FakeProviderFactory(default=ProviderResult.ok(response_body=body)), keep)
    stored = next(iter(h2.results.results.values()))
    assert stored.response_body == "é" * 5
    assert stored.response_truncated is True


async def test_the_ports_redactor_masks_what_a_provider_echoes_in_results_events_and_artifacts(
    tmp_path: Path,
) -> None:
    echoed = "k7Qx9Lm2Pz"  # a value with no shape the rules would recognise
    masker = SecretMasker()
    masker.add_secret_value(echoed)
    body = f'{{"error": "caller {echoed} unknown"}}'
    failure = ProviderResult.failure(
        ErrorCategory.INVALID_REQUEST, "DENIED", f"vendor said {echoed}", response_body=body
    )
    # The cut falls inside the value: it is masked before the body is cut, so no part of it is kept.
    keep = spec(policy=policies(result=ResultPolicy(save_response_body=True, response_body_max_bytes=21)))
    h = Harness(count=2, artifacts=JsonlArtifactSink(tmp_path), redactor=masker)
    # File I/O runs in threads a fake clock cannot wait for; nothing here sleeps, so use the real one.
    ports = dataclasses.replace(h.ports, clock=SystemClock())

    handle = await h.engine(FakeProviderFactory(default=failure)).start(keep, ports)
    await handle.completion()

    results = list(h.results.results.values())
    assert {(r.diagnostic, r.response_body) for r in results} == {
        (f"vendor said {MASK}", f'{{"error": "caller {MASK}')
    }
    assert [e.data["diagnostic"] for e in h.events.of_type(RunEventType.ITEM_ERROR)] == [
        f"vendor said {MASK}"
    ] * 2
    written = (tmp_path / "failed.jsonl").read_text()
    assert "vendor said" in written
    assert echoed not in written


async def test_without_a_ports_redactor_only_the_shape_rules_apply() -> None:
    failure = ProviderResult.failure(ErrorCategory.INVALID_REQUEST, "DENIED", "vendor said k7Qx9Lm2Pz pwd=x1")
    h = Harness(count=1)

    await h.run(FakeProviderFactory(default=failure))

    [result] = h.results.results.values()
    assert result.diagnostic == f"vendor said k7Qx9Lm2Pz pwd={MASK}"
