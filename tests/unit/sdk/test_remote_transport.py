"""RetryingRestClient applies the policy around the generated client's REST object (fake inner client)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3

from wepush.sdk.remote import RateLimited, RetryPolicy, ServiceUnavailable, TransportError, VersionConflict
from wepush.sdk.remote._transport import BearerToken, RetryingRestClient
from wepush_client.exceptions import ApiException

URL = "http://127.0.0.1:9/api/v1/workspaces/ws-1/accounts/acc-1"


class FakeResponse:
    def __init__(self, status: int, data: bytes = b"{}", headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.data = data
        self.headers = headers or {}

    def read(self) -> bytes:
        return self.data


class FakeRest:
    """Plays back outcomes: a FakeResponse to answer, an exception to raise."""

    def __init__(self, *outcomes: FakeResponse | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        self.calls.append({"method": method, "url": url, **kwargs})
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def rest_client(
    inner: FakeRest, token: str | Callable[[], str] = "tok", policy: RetryPolicy | None = None
) -> tuple[RetryingRestClient, list[float]]:
    slept: list[float] = []
    client = RetryingRestClient(
        inner,
        token=BearerToken(token),
        policy=policy
        or RetryPolicy(max_retries=3, initial_backoff=0.1, max_backoff=1.0, max_retry_wait=30.0),
        timeout=(5.0, 30.0),
        sleep=slept.append,
        rng=random.Random(1),
        now=lambda: datetime(2026, 8, 22, 8, 30, tzinfo=UTC),
    )
    return client, slept


def reset() -> urllib3.exceptions.ProtocolError:
    return urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))


def test_waits_exactly_the_retry_after_the_server_asked_for() -> None:
    inner = FakeRest(
        FakeResponse(429, headers={"Retry-After": "7"}),
        FakeResponse(503, headers={"Retry-After": "Sat, 22 Aug 2026 08:30:04 GMT"}),
        FakeResponse(200),
    )
    client, slept = rest_client(inner)

    response = client.request("GET", URL)

    assert response.status == 200
    assert slept == [7.0, 4.0]


def test_network_failures_back_off_exponentially_then_raise() -> None:
    inner = FakeRest(reset(), reset(), reset(), reset())
    client, slept = rest_client(inner)

    with pytest.raises(TransportError) as raised:
        client.request("GET", URL)

    assert raised.value.attempts == 4
    assert len(slept) == 3
    assert 0.05 <= slept[0] <= 0.1
    assert 0.1 <= slept[1] <= 0.2
    assert 0.2 <= slept[2] <= 0.4
    assert isinstance(raised.value.__cause__, urllib3.exceptions.ProtocolError)


def test_post_without_key_fails_on_the_first_network_error() -> None:
    inner = FakeRest(reset(), FakeResponse(200))
    client, slept = rest_client(inner)

    with pytest.raises(TransportError):
        client.request("POST", URL, headers={"Content-Type": "application/json"}, body={"a": 1})

    assert slept == []
    assert len(inner.calls) == 1


def test_keyed_post_is_replayed_with_identical_body_and_headers() -> None:
    inner = FakeRest(
        urllib3.exceptions.ReadTimeoutError(
            urllib3.HTTPConnectionPool("127.0.0.1", 9), URL, "read timed out"
        ),
        FakeResponse(202),
    )
    client, _ = rest_client(inner)

    client.request("POST", URL, headers={"Idempotency-Key": "k-1"}, body={"dryRun": True})

    first, second = inner.calls
    assert first["body"] == second["body"] == {"dryRun": True}
    assert first["headers"] == second["headers"]
    assert first["headers"]["Idempotency-Key"] == "k-1"


def test_token_provider_is_resolved_per_attempt_and_timeouts_default() -> None:
    tokens = iter(["a", "b"])
    inner = FakeRest(reset(), FakeResponse(200))
    client, _ = rest_client(inner, token=lambda: next(tokens))

    client.request("GET", URL)

    assert [call["headers"]["Authorization"] for call in inner.calls] == ["Bearer a", "Bearer b"]
    assert inner.calls[0]["_request_timeout"] == (5.0, 30.0)


def test_business_failures_raise_typed_errors_without_retrying() -> None:
    inner = FakeRest(
        FakeResponse(409, b'{"code": "VERSION_CONFLICT", "title": "Version conflict", "status": 409}')
    )
    client, slept = rest_client(inner)

    with pytest.raises(VersionConflict):
        client.request("PUT", URL)

    assert slept == []


def test_retry_after_above_the_cap_raises_immediately() -> None:
    inner = FakeRest(FakeResponse(429, headers={"Retry-After": "120"}))
    client, slept = rest_client(inner)

    with pytest.raises(RateLimited) as raised:
        client.request("GET", URL)

    assert raised.value.retry_after == 120.0
    assert slept == []


@pytest.mark.parametrize("digits", [400, 5000])
def test_an_absurdly_long_retry_after_is_a_wait_above_the_cap_not_a_crash(digits: int) -> None:
    inner = FakeRest(FakeResponse(503, headers={"Retry-After": "9" * digits}))
    client, slept = rest_client(inner)

    with pytest.raises(ServiceUnavailable) as raised:
        client.request("GET", URL)

    assert raised.value.retry_after == float("inf")
    assert slept == []


def test_tls_failure_reported_by_the_generated_client_is_a_transport_error() -> None:
    inner = FakeRest(ApiException(status=0, reason="SSLError\ncertificate verify failed"))
    client, slept = rest_client(inner)

    with pytest.raises(TransportError, match="SSLError") as raised:
        client.request("GET", URL)

    assert slept == []
    assert "certificate" not in str(raised.value)
