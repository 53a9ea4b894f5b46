"""A whole Run of the HTTP Provider through the embedded SDK against a loopback vendor."""

from __future__ import annotations

import json
from collections.abc import Iterator

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ErrorCategory,
    ExecutionPolicies,
    ItemState,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunState,
)
from wepush.agent.engine.testing import InMemoryEventSink, InMemoryResultSink
from wepush.agent.providers.testing import ScriptedResponse, VendorServer
from wepush.sdk.embedded import WePushEngine

from ._http_support import LOOPBACK_FACTORY, SECRETS, TOKEN, account_doc, message_doc


def run_spec(run_id: str, base_url: str, *, dry_run: bool = False) -> RunExecutionSpec:
    return RunExecutionSpec(
        run_id=run_id,
        provider=ProviderRef("wepush.http"),
        account_config=account_doc(base_url),
        message_config=message_doc(successCondition={"jsonPath": "$.success", "equals": True}),
        policies=ExecutionPolicies(
            concurrency=ConcurrencyPolicy(min=1, max=32, target=16), retry=RetryPolicy(max_attempts=1)
        ),
        dry_run=dry_run,
    )


def audience(count: int) -> Iterator[dict[str, str]]:
    for n in range(count):
        yield {"mobile": f"1380000{n:04d}", "content": f'notice "{n}"'}


async def test_embedded_http_run_delivers_every_recipient_once() -> None:
    results, events = InMemoryResultSink(), InMemoryEventSink()
    engine = (
        WePushEngine.builder()
        .provider(LOOPBACK_FACTORY)
        .secret_resolver(SECRETS)
        .result_sink(results)
        .event_sink(events)
        .build()
    )

    async with VendorServer() as vendor, engine:
        handle = await engine.start(run_spec("run-http", vendor.base_url), audience(300))
        summary = await handle.completion()

    assert (summary.final_state, summary.succeeded, summary.total) == (RunState.SUCCEEDED, 300, 300)
    received = sorted(r.json()["mobile"] for r in vendor.requests)  # type: ignore[index]
    assert received == sorted(f"1380000{n:04d}" for n in range(300))
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in vendor.requests)
    serialised = [r.to_json_line() for r in results.results.values()] + [
        json.dumps(e.to_json_dict()) for e in events.events
    ]
    assert not [line for line in serialised if TOKEN in line]


async def test_embedded_dry_run_never_reaches_the_vendor() -> None:
    results = InMemoryResultSink()
    engine = (
        WePushEngine.builder()
        .provider(LOOPBACK_FACTORY)
        .secret_resolver(SECRETS)
        .result_sink(results)
        .build()
    )

    async with VendorServer() as vendor, engine:
        handle = await engine.start(run_spec("run-dry", vendor.base_url, dry_run=True), audience(20))
        summary = await handle.completion()

    assert summary.succeeded == 20
    assert vendor.request_count == 0


async def test_vendor_rejecting_credentials_fails_the_run_fast() -> None:
    results = InMemoryResultSink()
    engine = (
        WePushEngine.builder()
        .provider(LOOPBACK_FACTORY)
        .secret_resolver(SECRETS)
        .result_sink(results)
        .build()
    )

    async with VendorServer(default=ScriptedResponse(401, body=TOKEN.encode())) as vendor, engine:
        handle = await engine.start(run_spec("run-401", vendor.base_url), audience(2000))
        summary = await handle.completion()

    failed = [r for r in results.results.values() if r.state is ItemState.FAILED]
    assert summary.final_state is RunState.FAILED
    assert vendor.request_count < 2000
    assert {r.error_category for r in failed} == {ErrorCategory.AUTHENTICATION}
    assert not [r for r in failed if r.diagnostic and TOKEN in r.diagnostic]
