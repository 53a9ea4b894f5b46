"""Each standard provider used from the embedded SDK and the engine against its local vendor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ExecutionPolicies,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunState,
)
from wepush.agent.engine.testing import InMemoryEventSink, InMemoryResultSink
from wepush.agent.providers.testing import run_through_engine
from wepush.sdk.embedded import WePushEngine

from ._http_cases import recipient_values
from ._stages import HttpStage, Stage, contract_subject


def _spec(stage: Stage, run_id: str, *, dry_run: bool = False) -> RunExecutionSpec:
    return RunExecutionSpec(
        run_id=run_id,
        provider=ProviderRef(stage.provider_id),
        account_config=stage.account(),
        message_config=stage.message(),
        policies=ExecutionPolicies(
            concurrency=ConcurrencyPolicy(min=1, max=8, target=8), retry=RetryPolicy(max_attempts=2)
        ),
        dry_run=dry_run,
    )


def _audience(count: int) -> Iterator[dict[str, Any]]:
    for n in range(1, count + 1):
        yield recipient_values(n)


async def test_embedded_run_delivers_every_recipient_once_and_leaks_no_secret(stage: Stage) -> None:
    results, events = InMemoryResultSink(), InMemoryEventSink()
    engine = (
        WePushEngine.builder()
        .provider(stage.factory)
        .secret_resolver(stage.resolver())
        .result_sink(results)
        .event_sink(events)
        .build()
    )

    async with engine:
        handle = await engine.start(_spec(stage, f"run-{stage.provider_id}"), _audience(25))
        summary = await handle.completion()

    assert (summary.final_state, summary.succeeded, summary.total) == (RunState.SUCCEEDED, 25, 25)
    assert stage.deliveries() == 25
    if isinstance(stage, HttpStage) and stage.case.token_path is not None:
        assert len(stage.token_fetches()) == 1, "the access token is cached for the whole run"
    written = [r.to_json_line() for r in results.results.values()]
    written += [json.dumps(e.to_json_dict(), ensure_ascii=False) for e in events.events]
    assert not [s for s in stage.secret_literals() for line in written if s in line]


async def test_embedded_dry_run_reaches_no_vendor(stage: Stage) -> None:
    engine = (
        WePushEngine.builder()
        .provider(stage.factory)
        .secret_resolver(stage.resolver())
        .result_sink(InMemoryResultSink())
        .build()
    )

    async with engine:
        handle = await engine.start(_spec(stage, "run-dry", dry_run=True), _audience(10))
        summary = await handle.completion()

    assert summary.succeeded == 10
    assert stage.deliveries() == 0


async def test_the_engine_never_exceeds_the_declared_concurrency(stage: Stage) -> None:
    declared = stage.factory.descriptor().concurrency_limit
    assert declared is not None

    observation = await run_through_engine(
        contract_subject(stage), items=3 * declared, concurrency=4 * declared
    )

    assert observation.summary.succeeded == 3 * declared
    assert observation.peak_overall <= declared
    assert stage.deliveries() == 3 * declared
