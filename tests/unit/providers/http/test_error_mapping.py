from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wepush.agent.providers.http import HTTP_ERROR_TABLE, map_status, parse_retry_after
from wepush.agent.providers.spi import ErrorCategory

C = ErrorCategory


@pytest.mark.parametrize(
    ("status", "code", "category", "retryable"),
    [
        (400, "HTTP_BAD_REQUEST", C.INVALID_REQUEST, False),
        (401, "HTTP_UNAUTHORIZED", C.AUTHENTICATION, False),
        (403, "HTTP_FORBIDDEN", C.AUTHORIZATION, False),
        (404, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (405, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (408, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
        (409, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (410, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (413, "HTTP_BAD_REQUEST", C.INVALID_REQUEST, False),
        (418, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (422, "HTTP_BAD_REQUEST", C.INVALID_REQUEST, False),
        (429, "HTTP_RATE_LIMITED", C.RATE_LIMITED, True),
        (500, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
        (501, "HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
        (502, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
        (503, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
        (504, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
        (599, "HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
    ],
)
def test_status_maps_to_stable_code_and_category(
    status: int, code: str, category: ErrorCategory, retryable: bool
) -> None:
    mapping = map_status(status)

    assert (mapping.code, mapping.category, mapping.retryable) == (code, category, retryable)


def test_error_table_codes_are_unique_and_named_by_their_key() -> None:
    assert all(key == row.code for key, row in HTTP_ERROR_TABLE.items())
    assert all(key.startswith("HTTP_") for key in HTTP_ERROR_TABLE)


def test_error_table_never_advises_retrying_categories_the_seed_forbids() -> None:
    never = {C.AUTHENTICATION, C.AUTHORIZATION, C.INVALID_REQUEST, C.RECIPIENT_INVALID, C.PERMANENT_REMOTE}

    assert not [row.code for row in HTTP_ERROR_TABLE.values() if row.category in never and row.retryable]


NOW = datetime(2026, 8, 22, 8, 30, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", timedelta(seconds=120)),
        (" 0 ", timedelta(0)),
        ("Sat, 22 Aug 2026 08:31:30 GMT", timedelta(seconds=90)),
        ("Sat, 22 Aug 2026 08:00:00 GMT", timedelta(0)),
        ("999999999", timedelta(days=1)),
        ("Sun, 23 Aug 2026 12:00:00 GMT", timedelta(days=1)),
    ],
)
def test_retry_after_accepts_seconds_and_http_dates(header: str, expected: timedelta) -> None:
    assert parse_retry_after(header, NOW) == expected


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "1.5", "Sat, 99 Foo 2026"])
def test_malformed_retry_after_is_ignored(header: str | None) -> None:
    assert parse_retry_after(header, NOW) is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # str.isdigit() accepts these; int() refuses the first and timedelta() overflows on the others.
        ("\u00b2", None),
        ("\u0663", None),
        ("100000000000000", timedelta(days=1)),
        ("9" * 5000, timedelta(days=1)),
        ("Fri, 31 Dec 9999 23:59:59 -2359", timedelta(days=1)),
    ],
)
def test_an_odd_retry_after_never_raises(header: str, expected: timedelta | None) -> None:
    assert parse_retry_after(header, NOW) == expected
