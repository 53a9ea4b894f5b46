"""The HTTP Provider when the vendor reads the whole request and hangs up: the message may have been
delivered, so the outcome is UNKNOWN, never a FAILED item that "resend the failed items" sends twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ErrorCategory,
    ExecutionPolicies,
    JsonlArtifactSink,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunSummary,
)
from wepush.agent.engine.testing import InMemoryResultSink
from wepush.sdk.embedded import WePushEngine

from ._dropping_server import DroppingServer
from ._http_support import (
    LOOPBACK_FACTORY,
    SECRETS,
    account_doc,
    http_session,
    message_doc,
    recipient,
    send,
    unused_loopback_port,
)

C = ErrorCategory


async def test_a_connection_lost_after_the_request_was_read_is_an_unknown_outcome() -> None:
    async with DroppingServer() as vendor, http_session(account_doc(vendor.base_url)) as session:
        result = await send(session, recipient(content="hello"))

    assert (result.success, result.category, result.provider_code, result.retryable) == (
        False,
        C.UNKNOWN,
        "HTTP_CONNECTION_LOST",
        False,
    )
    [dropped] = vendor.dropped
    assert dropped.json() == {"mobile": "13800000000", "content": "hello"}, "the vendor has the message"


async def test_a_refused_connection_is_still_a_network_failure() -> None:
    async with http_session(account_doc(f"http://127.0.0.1:{unused_loopback_port()}")) as session:
        result = await send(session)

    assert (result.category, result.provider_code) == (C.NETWORK, "HTTP_CONNECT_FAILED")


def _spec(run_id: str, base_url: str) -> RunExecutionSpec:
    # NETWORK is retried (at once, without delays): a lost connection must not be.
    retry = RetryPolicy(
        max_attempts=3, initial_delay=timedelta(0), max_delay=timedelta(0), jitter=timedelta(0)
    )
    return RunExecutionSpec(
        run_id=run_id,
        provider=ProviderRef("wepush.http"),
        account_config=account_doc(base_url),
        message_config=message_doc(),
        policies=ExecutionPolicies(concurrency=ConcurrencyPolicy(min=1, max=4, target=4), retry=retry),
    )


def _audience(count: int) -> Iterator[dict[str, str]]:
    for n in range(count):
        yield {"mobile": f"1380000{n:04d}", "content": "hello"}


async def _run(tmp_path: Path, run_id: str, base_url: str, count: int) -> RunSummary:
    engine = (
        WePushEngine.builder()
        .provider(LOOPBACK_FACTORY)
        .secret_resolver(SECRETS)
        .result_sink(InMemoryResultSink())
        .artifact_sink_factory(lambda spec: JsonlArtifactSink(tmp_path / spec.run_id))
        .build()
    )
    async with engine:
        handle = await engine.start(_spec(run_id, base_url), _audience(count))
        return await handle.completion()


def _lines(summary: RunSummary, name: str) -> list[dict[str, object]]:
    [artifact] = [a for a in summary.artifacts if a.name == name]
    path = Path(artifact.uri.removeprefix("file://"))
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


async def test_a_run_whose_connections_drop_counts_unknown_items_sent_once(tmp_path: Path) -> None:
    async with DroppingServer() as vendor:
        summary = await _run(tmp_path, "run-dropped", vendor.base_url, 5)

    assert (summary.unknown, summary.failed, summary.total) == (5, 0, 5)
    assert len(vendor.requests) == 5, "a message that may have been delivered is not sent again"
    assert [a.name for a in summary.artifacts] == ["unknown.jsonl"]
    lines = _lines(summary, "unknown.jsonl")
    assert {(line["state"], line["errorCategory"], line["providerCode"]) for line in lines} == {
        ("UNKNOWN", "UNKNOWN", "HTTP_CONNECTION_LOST")
    }


async def test_a_run_that_cannot_connect_counts_failed_items(tmp_path: Path) -> None:
    summary = await _run(tmp_path, "run-refused", f"http://127.0.0.1:{unused_loopback_port()}", 3)

    assert (summary.failed, summary.unknown, summary.retried) == (3, 0, 6)
    assert [a.name for a in summary.artifacts] == ["failed.jsonl"]
    assert {line["errorCategory"] for line in _lines(summary, "failed.jsonl")} == {"NETWORK"}
