from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from wepush.agent.engine import (
    ChangeConcurrency,
    ConcurrencyPolicy,
    ConfigDocument,
    EngineValidationError,
    ExecutionPolicies,
    ItemResult,
    ItemState,
    ProviderRef,
    RecipientRecord,
    RunExecutionSpec,
    RunState,
    ThreadSafetyMode,
    ValidationCategory,
)
from wepush.agent.engine.testing import FakeClock, InMemoryArtifactSink, InMemoryEventSink, InMemoryResultSink
from wepush.agent.providers.fake import FakeProviderFactory, Hang
from wepush.sdk.embedded import WePushEngine

FAKE_ID = FakeProviderFactory().descriptor().provider_id


def spec(run_id: str, provider: str = FAKE_ID, concurrency: int = 4) -> RunExecutionSpec:
    return RunExecutionSpec(
        run_id=run_id,
        provider=ProviderRef(provider),
        account_config=ConfigDocument.from_json("fake.account", "1", {"name": "acct"}),
        message_config=ConfigDocument.from_json("fake.message", "1", {"text": "hi {address}"}),
        policies=ExecutionPolicies(concurrency=ConcurrencyPolicy(min=1, max=32, target=concurrency)),
    )


def people(count: int) -> Iterator[dict[str, Any]]:
    for n in range(count):
        yield {"address": f"user{n}@example.test"}


def customers(count: int, prefix: str) -> Iterator[RecipientRecord]:
    # The in-memory sink keys results by (itemId, attempt), so ids must differ between runs.
    for n in range(1, count + 1):
        yield RecipientRecord.of(f"{prefix}-{n}", n, {"address": f"{prefix}{n}@example.test"})


async def test_concurrent_runs_share_one_result_sink_and_event_sink() -> None:
    clock, results, events = FakeClock(), InMemoryResultSink(), InMemoryEventSink()
    provider = FakeProviderFactory(latency=0.01, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    engine = (
        WePushEngine.builder().provider(provider).result_sink(results).event_sink(events).clock(clock).build()
    )

    async with engine:
        first = await engine.start(spec("run-a"), customers(300, "a"))
        second = await engine.start(spec("run-b"), customers(200, "b"))
        summaries = await clock.run(asyncio.gather(first.completion(), second.completion()))
        shared_still_open = not results.closed and not events.closed

    assert [s.succeeded for s in summaries] == [300, 200]
    by_run = {run: sum(1 for r in results.results.values() if r.run_id == run) for run in ("run-a", "run-b")}
    assert by_run == {"run-a": 300, "run-b": 200}
    assert {e.run_id for e in events.events} == {"run-a", "run-b"}
    assert shared_still_open
    assert results.closed
    assert events.closed


async def test_factory_sinks_belong_to_one_run_and_close_with_it() -> None:
    clock = FakeClock()
    made: dict[str, tuple[InMemoryResultSink, InMemoryEventSink, InMemoryArtifactSink]] = {}

    def results_for(run: RunExecutionSpec) -> InMemoryResultSink:
        made[run.run_id] = (InMemoryResultSink(), InMemoryEventSink(), InMemoryArtifactSink())
        return made[run.run_id][0]

    engine = (
        WePushEngine.builder()
        .provider(FakeProviderFactory())
        .result_sink_factory(results_for)
        .event_sink_factory(lambda run: made[run.run_id][1])
        .artifact_sink_factory(lambda run: made[run.run_id][2])
        .clock(clock)
        .build()
    )

    async with engine:
        handles = [await engine.start(spec(run), people(50)) for run in ("run-a", "run-b")]
        summaries = await clock.run(asyncio.gather(*(h.completion() for h in handles)))
        await clock.run(asyncio.sleep(0))

    assert [s.succeeded for s in summaries] == [50, 50]
    for run, (results, events, artifacts) in made.items():
        assert {r.run_id for r in results.results.values()} == {run}
        assert results.closed
        assert events.closed
        assert artifacts.closed
        assert artifacts.records["success.jsonl"] == 50
    assert summaries[0].artifacts[0].record_count == 50


async def test_factory_sinks_are_closed_when_the_start_is_rejected() -> None:
    made: list[InMemoryResultSink | InMemoryEventSink | InMemoryArtifactSink] = []

    def keep(sink: Any) -> Any:
        made.append(sink)
        return sink

    engine = (
        WePushEngine.builder()
        .provider(FakeProviderFactory())
        .result_sink_factory(lambda _: keep(InMemoryResultSink()))
        .event_sink_factory(lambda _: keep(InMemoryEventSink()))
        .artifact_sink_factory(lambda _: keep(InMemoryArtifactSink()))
        .clock(FakeClock())
        .build()
    )

    async with engine:
        with pytest.raises(EngineValidationError) as raised:
            await engine.start(spec("run-x", provider="acme.unknown"), people(5))

    assert raised.value.category is ValidationCategory.PROVIDER_NOT_AVAILABLE
    assert len(made) == 3
    assert all(sink.closed for sink in made)


@pytest.mark.parametrize("failure", ["event sink factory", "recipients"])
async def test_sinks_already_made_are_closed_when_a_later_factory_or_the_recipients_fail(
    failure: str,
) -> None:
    made: list[InMemoryResultSink] = []

    def results_for(_: RunExecutionSpec) -> InMemoryResultSink:
        made.append(InMemoryResultSink())
        return made[-1]

    def events_for(_: RunExecutionSpec) -> InMemoryEventSink:
        if failure == "event sink factory":
            raise OSError("the event log volume is full")
        return InMemoryEventSink()

    engine = (
        WePushEngine.builder()
        .provider(FakeProviderFactory())
        .result_sink_factory(results_for)
        .event_sink_factory(events_for)
        .clock(FakeClock())
        .build()
    )
    recipients: Any = 42 if failure == "recipients" else people(5)

    async with engine:
        with pytest.raises((OSError, TypeError)):
            await engine.start(spec("run-x"), recipients)
        assert engine.active_runs == ()

    assert len(made) == 1
    assert made[0].closed


async def test_a_provider_not_given_to_the_builder_is_unavailable_even_if_installed() -> None:
    engine = WePushEngine.builder().provider(FakeProviderFactory()).result_sink(InMemoryResultSink()).build()

    async with engine:
        with pytest.raises(EngineValidationError) as raised:
            await engine.start(spec("run-http", provider="wepush.http"), people(1))

    assert raised.value.category is ValidationCategory.PROVIDER_NOT_AVAILABLE
    assert [d.provider_id for d in engine.providers()] == [FAKE_ID]


class FirstAppendProbe(InMemoryResultSink):
    """Notes how many recipients the generator had produced when the first result arrived."""

    def __init__(self, produced: list[int]) -> None:
        super().__init__()
        self._produced = produced
        self.produced_at_first_append: int | None = None

    async def append(self, batch: Sequence[ItemResult]) -> None:
        if self.produced_at_first_append is None:
            self.produced_at_first_append = self._produced[0]
        await super().append(batch)


async def test_async_recipients_are_streamed_not_materialised() -> None:
    total, produced, clock = 20_000, [0], FakeClock()

    async def audience() -> AsyncIterator[dict[str, str]]:
        for n in range(total):
            produced[0] += 1
            yield {"address": f"user{n}@example.test"}

    probe = FirstAppendProbe(produced)
    engine = WePushEngine.builder().provider(FakeProviderFactory()).result_sink(probe).clock(clock).build()

    async with engine:
        handle = await engine.start(spec("run-stream"), audience())
        summary = await clock.run(handle.completion())

    assert summary.succeeded == total
    assert probe.produced_at_first_append is not None
    assert probe.produced_at_first_append < total
    assert ("item-1", 1) in probe.results
    assert probe.results[("item-1", 1)].state is ItemState.SUCCEEDED


async def test_recipient_records_from_a_generator_keep_their_ids_and_the_generator_is_closed() -> None:
    finished = []

    def records() -> Iterator[RecipientRecord]:
        try:
            for n in range(1, 4):
                yield RecipientRecord.of(f"customer-{n}", n, {"address": f"c{n}@example.test"})
        finally:
            finished.append(True)

    clock, results = FakeClock(), InMemoryResultSink()
    engine = WePushEngine.builder().provider(FakeProviderFactory()).result_sink(results).clock(clock).build()

    async with engine:
        handle = await engine.start(spec("run-records"), records())
        await clock.run(handle.completion())

    assert sorted(item for item, _ in results.results) == ["customer-1", "customer-2", "customer-3"]
    assert finished == [True]


async def test_change_concurrency_command_reaches_the_run() -> None:
    clock = FakeClock()
    provider = FakeProviderFactory(latency=0.01, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    engine = WePushEngine.builder().provider(provider).result_sink(InMemoryResultSink()).clock(clock).build()

    async with engine:
        handle = await engine.start(spec("run-c", concurrency=2), people(500))
        outcome = await handle.submit(ChangeConcurrency("raise-1", 16))
        summary = await clock.run(handle.completion())

    assert outcome.accepted
    assert summary.succeeded == 500
    assert handle.peak_concurrency == 16


async def test_leaving_the_engine_cancels_active_runs_before_closing_shared_sinks() -> None:
    clock, results = FakeClock(), InMemoryResultSink()
    provider = FakeProviderFactory(default=Hang(), thread_safety=ThreadSafetyMode.THREAD_SAFE)
    engine = WePushEngine.builder().provider(provider).result_sink(results).clock(clock).build()

    await engine.open()
    handle = await engine.start(spec("run-hang"), people(10))
    await clock.run(engine.close())

    summary = await handle.completion()
    assert summary.final_state is RunState.CANCELLED
    assert summary.total == results.count == 10
    assert results.closed
    assert engine.active_runs == ()


async def test_start_before_entering_the_engine_is_refused() -> None:
    engine = WePushEngine.builder().provider(FakeProviderFactory()).result_sink(InMemoryResultSink()).build()

    with pytest.raises(RuntimeError, match="async with"):
        await engine.start(spec("run-early"), people(1))


@pytest.mark.parametrize(
    ("configure", "message"),
    [
        (lambda b: b.result_sink(InMemoryResultSink()), "register at least one provider"),
        (lambda b: b.provider(FakeProviderFactory()), "exactly one of result_sink and result_sink_factory"),
        (
            lambda b: (
                b.provider(FakeProviderFactory())
                .provider(FakeProviderFactory())
                .result_sink(InMemoryResultSink())
            ),
            f"provider '{FAKE_ID}' was registered twice",
        ),
        (
            lambda b: (
                b.provider(FakeProviderFactory())
                .result_sink(InMemoryResultSink())
                .event_sink(InMemoryEventSink())
                .event_sink_factory(lambda _: InMemoryEventSink())
            ),
            "at most one of event_sink and event_sink_factory",
        ),
    ],
)
def test_builder_refuses_an_inconsistent_configuration(configure: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        configure(WePushEngine.builder()).build()
