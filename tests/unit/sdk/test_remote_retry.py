"""The retry decision table and Retry-After parsing, without any network."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from wepush.sdk.remote import ReconnectPolicy, RetryPolicy, is_replay_safe, parse_retry_after

NOW = datetime(2026, 8, 22, 8, 30, 0, tzinfo=UTC)
KEYED = {"Idempotency-Key": "20260822-manual-001"}
POLICY = RetryPolicy(max_retries=3, initial_backoff=0.5, max_backoff=4.0, max_retry_wait=30.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", 5.0),
        (" 0 ", 0.0),
        ("Sat, 22 Aug 2026 08:30:12 GMT", 12.0),
        ("Sat, 22 Aug 2026 08:29:00 GMT", 0.0),
        ("-3", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_delay_seconds_or_an_http_date(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


@pytest.mark.parametrize(
    ("method", "headers", "safe"),
    [
        ("GET", {}, True),
        ("head", {}, True),
        ("OPTIONS", {}, True),
        ("POST", {}, False),
        ("POST", KEYED, True),
        ("POST", {"idempotency-key": "k"}, True),
        ("POST", {"Idempotency-Key": ""}, False),
        ("PUT", KEYED, False),
        ("DELETE", {}, False),
        ("PATCH", {}, False),
    ],
)
def test_replay_safety_by_method_and_idempotency_key(
    method: str, headers: dict[str, str], safe: bool
) -> None:
    assert is_replay_safe(method, headers) is safe


@pytest.mark.parametrize(
    ("method", "headers", "retried"),
    [
        ("GET", {}, True),
        ("POST", KEYED, True),
        ("POST", {}, False),
        ("PUT", {}, False),
        ("DELETE", {}, False),
    ],
)
def test_network_errors_are_retried_only_for_replay_safe_requests(
    method: str, headers: dict[str, str], retried: bool
) -> None:
    delay = POLICY.after_network_error(0, method, headers, random.Random(7))

    assert (delay is not None) is retried


@pytest.mark.parametrize(
    ("status", "method", "headers", "retry_after", "expected"),
    [
        (429, "GET", {}, 2.0, 2.0),
        (429, "POST", {}, 2.0, 2.0),
        (429, "PUT", {}, 0.0, 0.0),
        (503, "GET", {}, 3.0, 3.0),
        (503, "POST", KEYED, 3.0, 3.0),
        (503, "POST", {}, 3.0, None),
        (502, "GET", {}, None, "backoff"),
        (504, "POST", {}, None, None),
        (429, "GET", {}, 31.0, None),
        (503, "GET", {}, 30.0, 30.0),
        (429, "GET", {}, None, "backoff"),
        (400, "GET", {}, None, None),
        (401, "GET", {}, None, None),
        (404, "GET", {}, None, None),
        (409, "POST", KEYED, None, None),
        (410, "GET", {}, None, None),
        (500, "GET", {}, None, None),
        (500, "GET", {}, 1.0, None),
    ],
)
def test_status_decision_table(
    status: int, method: str, headers: dict[str, str], retry_after: float | None, expected: object
) -> None:
    delay = POLICY.after_status(0, method, headers, status, retry_after, random.Random(7))

    if expected == "backoff":
        assert delay is not None
        assert 0.25 <= delay <= 0.5
    else:
        assert delay == expected


def test_nothing_is_retried_once_max_retries_is_reached() -> None:
    rng = random.Random(7)

    assert POLICY.after_network_error(3, "GET", {}, rng) is None
    assert POLICY.after_status(3, "GET", {}, 429, 0.0, rng) is None
    assert POLICY.after_network_error(2, "GET", {}, rng) is not None


def test_backoff_doubles_with_equal_jitter_up_to_the_maximum() -> None:
    rng = random.Random(11)
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]

    for attempt, ceiling in enumerate(ceilings):
        samples = [POLICY.backoff(attempt, rng) for _ in range(200)]
        assert all(ceiling / 2 <= sample <= ceiling for sample in samples)
        assert max(samples) - min(samples) > ceiling / 10


def test_reconnect_delay_starts_from_the_server_retry_field() -> None:
    policy = ReconnectPolicy(initial_delay=0.5, max_delay=10.0)
    rng = random.Random(3)

    assert 1.0 <= policy.delay(1, 2.0, rng) <= 2.0
    assert 2.0 <= policy.delay(2, 2.0, rng) <= 4.0
    assert 0.25 <= policy.delay(1, None, rng) <= 0.5
    assert 5.0 <= policy.delay(10, None, rng) <= 10.0


@pytest.mark.parametrize(
    "build",
    [
        lambda: RetryPolicy(max_retries=-1),
        lambda: RetryPolicy(max_retry_wait=-1.0),
        lambda: ReconnectPolicy(max_attempts=0),
        lambda: ReconnectPolicy(heartbeat_timeout=0.0),
    ],
)
def test_nonsensical_limits_are_rejected(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=">"):
        build()


@pytest.mark.parametrize(
    ("attempt", "status", "retry_after", "expected"),
    [
        (0, 429, 2.0, 2.0),
        (0, 503, 0.0, 0.0),
        (2, 429, None, "backoff"),
        (3, 429, 1.0, None),  # max_retries reached
        (0, 503, 31.0, None),  # above max_retry_wait
        (0, 502, 1.0, None),  # a gateway may have forwarded the upload
        (0, 409, 1.0, None),
        (0, 500, 1.0, None),
    ],
)
def test_replayable_uploads_retry_only_answers_that_were_not_processed(
    attempt: int, status: int, retry_after: float | None, expected: float | str | None
) -> None:
    delay = POLICY.after_unprocessed(attempt, status, retry_after, random.Random(7))

    if expected == "backoff":
        assert delay is not None
        assert 0.5 * 2.0 <= delay <= 2.0
    else:
        assert delay == expected
