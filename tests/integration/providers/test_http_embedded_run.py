"""A whole Run of the HTTP Provider through the embedded SDK against a loopback vendor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

from tests.fixtures.blackhole import blackhole
from wepush.agent.engine import (
    ConcurrencyPolicy,
    ErrorCategory,
    ExecutionPolicies,
    ItemState,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunState,
    TimeoutPolicy,
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


def loopback_engine(results: InMemoryResultSink, events: InMemoryEventSink | None = None) -> WePushEngine:
    """The embedded engine with the HTTP provider allowed on loopback and the test secrets."""
    builder = WePushEngine.builder().provider(LOOPBACK_FACTORY).secret_resolver(SECRETS).result_sink(results)
    return (builder if events is None else builder.event_sink(events)).build()


def audience(count: int) -> Iterator[dict[str, str]]:
    for n in range(count):
        yield {"mobile": f"1380000{n:04d}", "content": f'notice "{n}"'}


async def test_embedded_http_run_delivers_every_recipient_once() -> None:
    results, events = InMemoryResultSink(), InMemoryEventSink()
    engine = loopback_engine(results, events)

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
    engine = loopback_engine(results)

    async with VendorServer() as vendor, engine:
        handle = await engine.start(run_spec("run-dry", vendor.base_url, dry_run=True), audience(20))
        summary = await handle.completion()

    assert summary.succeeded == 20
    assert vendor.request_count == 0


async def test_vendor_rejecting_credentials_fails_the_run_fast() -> None:
    results = InMemoryResultSink()
    engine = loopback_engine(results)

    async with VendorServer(default=ScriptedResponse(401, body=TOKEN.encode())) as vendor, engine:
        handle = await engine.start(run_spec("run-401", vendor.base_url), audience(2000))
        summary = await handle.completion()

    failed = [r for r in results.results.values() if r.state is ItemState.FAILED]
    assert summary.final_state is RunState.FAILED
    assert vendor.request_count < 2000
    assert {r.error_category for r in failed} == {ErrorCategory.AUTHENTICATION}
    assert not [r for r in failed if r.diagnostic and TOKEN in r.diagnostic]


async def test_an_item_deadline_while_connecting_to_a_silent_host_fails_the_item_as_not_sent() -> None:
    """The engine's item deadline cut the call off before the HTTP provider's own connect timeout: the
    provider had said it sent nothing yet, so the item is FAILED (NETWORK), not UNKNOWN."""
    results = InMemoryResultSink()
    engine = loopback_engine(results)
    with blackhole() as port:
        spec = run_spec("run-silent", f"http://127.0.0.1:{port}")
        spec = replace(
            spec,
            account_config=account_doc(
                f"http://127.0.0.1:{port}", connectTimeout="PT10S", requestTimeout="PT30S"
            ),
            policies=replace(spec.policies, timeout=TimeoutPolicy(item=timedelta(seconds=1))),
        )
        async with engine:
            handle = await engine.start(spec, audience(2))
            summary = await handle.completion()

    assert (summary.failed, summary.unknown) == (2, 0)
    # The provider's own timer is set to the same deadline: whichever fires first, nothing was sent.
    assert {(r.state, r.error_category) for r in results.results.values()} == {
        (ItemState.FAILED, ErrorCategory.NETWORK)
    }
    assert {r.provider_code for r in results.results.values()} <= {
        "ITEM_DEADLINE_EXCEEDED",
        "HTTP_CONNECT_TIMEOUT",
    }


async def test_an_item_deadline_while_the_vendor_holds_the_request_is_unknown() -> None:
    """The other side of the test above: the request went out, so the message may be there."""
    results = InMemoryResultSink()
    engine = loopback_engine(results)
    async with VendorServer(default=ScriptedResponse(200, delay_seconds=30)) as vendor:
        spec = run_spec("run-held", vendor.base_url)
        spec = replace(
            spec, policies=replace(spec.policies, timeout=TimeoutPolicy(item=timedelta(seconds=1)))
        )
        async with engine:
            handle = await engine.start(spec, audience(2))
            summary = await handle.completion()

    assert (summary.failed, summary.unknown) == (0, 2)
    # Whichever of the engine's deadline, the provider's timer or its cancellation hook ends the call.
    assert {r.state for r in results.results.values()} == {ItemState.UNKNOWN}
    assert {r.provider_code for r in results.results.values()} <= {
        "ITEM_DEADLINE_EXCEEDED",
        "HTTP_TIMEOUT",
        "HTTP_CANCELLED",
    }
