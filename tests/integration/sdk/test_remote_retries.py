"""The retry policy over a real connection: which failures are retried, and how Retry-After is honoured."""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from aiohttp import web

from wepush.sdk.remote import (
    RateLimited,
    ServiceUnavailable,
    TransportError,
    WePushClient,
)

from ._service import (
    TOKEN,
    WS,
    Action,
    ScriptedService,
    account,
    drop_mid_body,
    problem,
    reply,
    run_accepted,
    ws_path,
)

ACCOUNT = ws_path("accounts", "acc-1")
CONFIRMATION = ws_path("jobs", "job-1", "run-confirmation")
START = ws_path("jobs", "job-1", "runs")


def slow(seconds: float, then: Action) -> Action:
    async def action(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await then(request)

    return action


def test_get_is_retried_after_the_connection_drops_mid_response(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", ACCOUNT, drop_mid_body(), reply(200, account()))

    fetched = client.workspace(WS).accounts.get("acc-1")

    assert fetched.id == "acc-1"
    assert fetched.version == 1
    assert len(service.seen("GET", ACCOUNT)) == 2


def test_post_without_idempotency_key_is_not_retried_after_a_drop(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("POST", CONFIRMATION, drop_mid_body(), reply(200, {"never": "sent"}))

    with pytest.raises(TransportError) as raised:
        client.workspace(WS).jobs.confirm_run("job-1")

    assert raised.value.attempts == 1
    assert raised.value.method == "POST"
    assert len(service.seen("POST", CONFIRMATION)) == 1


def test_put_is_not_retried_after_a_drop(service: ScriptedService, client: WePushClient) -> None:
    service.script("PUT", ACCOUNT, drop_mid_body(), reply(200, account(version=2)))

    with pytest.raises(TransportError):
        client.workspace(WS).accounts.update("acc-1", {"name": "renamed", "config": {}, "version": 1})

    assert len(service.seen("PUT", ACCOUNT)) == 1


def test_idempotency_keyed_post_is_retried_with_the_same_key_and_body(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("POST", START, drop_mid_body(), drop_mid_body(), reply(202, run_accepted("run-7")))

    accepted = client.workspace(WS).runs.start("job-1", dry_run=True, reason="smoke")

    assert accepted.id == "run-7"
    attempts = service.seen("POST", START)
    assert len(attempts) == 3
    keys = {attempt.headers["Idempotency-Key"] for attempt in attempts}
    assert len(keys) == 1
    assert all(keys)
    assert {attempt.body for attempt in attempts} == {attempts[0].body}
    assert b'"dryRun": true' in attempts[0].body


def test_caller_supplied_idempotency_key_is_sent(service: ScriptedService, client: WePushClient) -> None:
    service.script("POST", START, reply(202, run_accepted()))

    client.workspace(WS).runs.start("job-1", confirmation_token="ct-1", idempotency_key="manual-20260822-001")

    (attempt,) = service.seen("POST", START)
    assert attempt.headers["Idempotency-Key"] == "manual-20260822-001"


def test_read_timeout_on_get_is_retried(service: ScriptedService) -> None:
    service.script("GET", ACCOUNT, slow(2.0, reply(200, account())), reply(200, account(version=3)))
    with WePushClient(
        service.endpoint, TOKEN, request_timeout=0.3, initial_backoff=0.01, max_backoff=0.02
    ) as impatient:
        fetched = impatient.workspace(WS).accounts.get("acc-1")

    assert fetched.version == 3


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    return port


def test_connection_refused_ends_in_transport_error_after_max_retries(closed_port: int) -> None:
    with (
        WePushClient(
            f"http://127.0.0.1:{closed_port}", TOKEN, max_retries=2, initial_backoff=0.01, max_backoff=0.02
        ) as unreachable,
        pytest.raises(TransportError) as raised,
    ):
        unreachable.workspace(WS).accounts.get("acc-1")

    assert raised.value.attempts == 3
    assert raised.value.path == ACCOUNT
    assert TOKEN not in str(raised.value)
    assert TOKEN not in repr(raised.value)


def test_429_is_retried_after_the_retry_after_delay(service: ScriptedService, client: WePushClient) -> None:
    service.script(
        "GET", ACCOUNT, problem(429, "RATE_LIMITED", headers={"Retry-After": "1"}), reply(200, account())
    )

    started = time.monotonic()
    fetched = client.workspace(WS).accounts.get("acc-1")

    assert fetched.id == "acc-1"
    assert time.monotonic() - started >= 1.0
    assert len(service.seen("GET", ACCOUNT)) == 2


def test_429_on_a_post_without_key_is_retried_because_it_was_not_processed(
    service: ScriptedService, client: WePushClient
) -> None:
    confirmation = {
        "jobId": "job-1",
        "providerId": "wepush.http",
        "accountId": "acc-1",
        "accountName": "a",
        "messageId": "msg-1",
        "messageRevision": 1,
        "audienceSnapshotId": "snap-1",
        "recipientCount": 3,
        "policies": {},
        "dryRun": False,
        "confirmationToken": "ct-1",
        "expiresAt": "2026-08-22T08:35:00Z",
    }
    service.script(
        "POST",
        CONFIRMATION,
        problem(429, "RATE_LIMITED", headers={"Retry-After": "0"}),
        reply(200, confirmation),
    )

    confirmed = client.workspace(WS).jobs.confirm_run("job-1")

    assert confirmed.confirmation_token == "ct-1"
    assert len(service.seen("POST", CONFIRMATION)) == 2


def test_retry_after_above_the_cap_raises_at_once_with_the_requested_wait(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", ACCOUNT, problem(429, "RATE_LIMITED", headers={"Retry-After": "3600"}))

    with pytest.raises(RateLimited) as raised:
        client.workspace(WS).accounts.get("acc-1")

    assert raised.value.retry_after == 3600.0
    assert raised.value.code == "RATE_LIMITED"
    assert len(service.seen("GET", ACCOUNT)) == 1


def test_503_with_an_http_date_retry_after_is_retried_for_get(
    service: ScriptedService, client: WePushClient
) -> None:
    moment = format_datetime(datetime.now(UTC) - timedelta(seconds=5), usegmt=True)
    service.script(
        "GET",
        ACCOUNT,
        problem(503, "AGENT_NOT_AVAILABLE", headers={"Retry-After": moment}),
        reply(200, account()),
    )

    assert client.workspace(WS).accounts.get("acc-1").id == "acc-1"
    assert len(service.seen("GET", ACCOUNT)) == 2


def test_503_on_a_post_without_key_is_not_retried(service: ScriptedService, client: WePushClient) -> None:
    service.script("POST", CONFIRMATION, problem(503, "PROVIDER_NOT_AVAILABLE", headers={"Retry-After": "0"}))

    with pytest.raises(ServiceUnavailable) as raised:
        client.workspace(WS).jobs.confirm_run("job-1")

    assert raised.value.code == "PROVIDER_NOT_AVAILABLE"
    assert raised.value.retry_after == 0.0
    assert len(service.seen("POST", CONFIRMATION)) == 1


def test_rate_limiting_gives_up_after_max_retries(service: ScriptedService, client: WePushClient) -> None:
    limited = problem(429, "RATE_LIMITED", headers={"Retry-After": "0"})
    service.script("GET", ACCOUNT, limited, limited, limited, limited, reply(200, account()))

    with pytest.raises(RateLimited):
        client.workspace(WS).accounts.get("acc-1")

    assert len(service.seen("GET", ACCOUNT)) == 4


def test_token_provider_is_asked_for_every_attempt(service: ScriptedService) -> None:
    issued = iter(["tok-first", "tok-second"])
    service.script("GET", ACCOUNT, drop_mid_body(), reply(200, account()))
    with WePushClient(service.endpoint, lambda: next(issued), initial_backoff=0.01) as rotating:
        rotating.workspace(WS).accounts.get("acc-1")

    assert [seen.headers["Authorization"] for seen in service.seen("GET", ACCOUNT)] == [
        "Bearer tok-first",
        "Bearer tok-second",
    ]
