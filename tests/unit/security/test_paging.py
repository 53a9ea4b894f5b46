from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from wepush.server.application.paging import (
    DEFAULT_PAGE_LIMIT,
    CursorCodec,
    CursorInvalid,
    Page,
    PageLimitInvalid,
    validate_limit,
)

KEY = b"k" * 32
NOW = datetime(2026, 8, 22, 12, 0, tzinfo=UTC)
FILTERS: dict[str, object] = {"name": "weekly", "state": ["RUNNING", "FAILED"], "createdAfter": NOW}


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def codec(clock: Clock) -> CursorCodec:
    return CursorCodec(KEY, clock=clock)


def test_cursor_round_trips_its_keyset_position(codec: CursorCodec) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=("2026-08-22T11:00:00+00:00", "run-9"))

    assert codec.decode(cursor, resource="runs", filters=FILTERS) == ("2026-08-22T11:00:00+00:00", "run-9")
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_keyset_helpers_round_trip_timestamp_and_id(codec: CursorCodec) -> None:
    at = datetime(2026, 8, 22, 19, 30, tzinfo=UTC) + timedelta(microseconds=123)

    cursor = codec.encode_keyset(resource="runs", filters={}, at=at, id="run-1")

    assert codec.decode_keyset(cursor, resource="runs", filters={}) == (at, "run-1")


def test_filter_order_and_unset_filters_do_not_change_the_binding(codec: CursorCodec) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=(1,))
    same_filters = {"createdAfter": NOW, "state": ["RUNNING", "FAILED"], "name": "weekly", "jobId": None}

    assert codec.decode(cursor, resource="runs", filters=same_filters) == (1,)


def test_a_cursor_altered_in_the_unused_bits_of_its_last_character_is_refused(codec: CursorCodec) -> None:
    # A 32-byte tag is 43 characters whose last holds two unused bits: "…A" to "…D" decode alike.
    cursor = codec.encode(resource="runs", filters=FILTERS, position=("a", "run-1"))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(cursor[-1])
    same_bytes = [c for c in alphabet if alphabet.index(c) >> 2 == last >> 2 and c != cursor[-1]]
    assert same_bytes  # the tag's length leaves unused bits: the test tests something

    for altered in same_bytes:
        with pytest.raises(CursorInvalid):
            codec.decode(cursor[:-1] + altered, resource="runs", filters=FILTERS)
    assert codec.decode(cursor, resource="runs", filters=FILTERS) == ("a", "run-1")


def test_tampered_cursor_is_invalid(codec: CursorCodec) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=("a", "run-1"))
    payload_text, tag = cursor.split(".")
    payload = json.loads(base64.urlsafe_b64decode(payload_text + "=" * (-len(payload_text) % 4)))
    payload["k"] = ["a", "run-0"]
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode() + "." + tag

    with pytest.raises(CursorInvalid) as caught:
        codec.decode(forged, resource="runs", filters=FILTERS)

    assert caught.value.reason == "tampered"
    assert caught.value.code == "CURSOR_INVALID"
    assert caught.value.status == 400


def test_cursor_from_another_resource_is_invalid(codec: CursorCodec) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=(1,))

    with pytest.raises(CursorInvalid) as caught:
        codec.decode(cursor, resource="audit-events", filters=FILTERS)

    assert caught.value.reason == "resource"


@pytest.mark.parametrize(
    "other_filters",
    [
        {**FILTERS, "name": "daily"},
        {**FILTERS, "state": ["RUNNING"]},
        {**FILTERS, "createdAfter": NOW + timedelta(seconds=1)},
        {"name": "weekly"},
    ],
    ids=["name", "state", "time", "dropped-filters"],
)
def test_cursor_reused_with_different_filters_is_invalid(
    codec: CursorCodec, other_filters: dict[str, object]
) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=(1,))

    with pytest.raises(CursorInvalid) as caught:
        codec.decode(cursor, resource="runs", filters=other_filters)

    assert caught.value.reason == "filters"


def test_cursor_signed_with_another_key_is_invalid(codec: CursorCodec) -> None:
    cursor = CursorCodec(b"x" * 32).encode(resource="runs", filters=FILTERS, position=(1,))

    with pytest.raises(CursorInvalid):
        codec.decode(cursor, resource="runs", filters=FILTERS)


@pytest.mark.parametrize("cursor", ["", "abc", "abc.def", "!!!.???", "é.é", "a" * 5000])
def test_garbage_cursor_is_invalid(codec: CursorCodec, cursor: str) -> None:
    with pytest.raises(CursorInvalid):
        codec.decode(cursor, resource="runs", filters=FILTERS)


def test_cursor_older_than_max_age_is_invalid(codec: CursorCodec, clock: Clock) -> None:
    cursor = codec.encode(resource="runs", filters=FILTERS, position=(1,))
    clock.now = NOW + timedelta(hours=2)

    assert codec.decode(cursor, resource="runs", filters=FILTERS, max_age=timedelta(hours=3)) == (1,)
    with pytest.raises(CursorInvalid) as caught:
        codec.decode(cursor, resource="runs", filters=FILTERS, max_age=timedelta(hours=1))
    assert caught.value.reason == "expired"


def test_short_cursor_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        CursorCodec(b"short")


def test_page_from_limit_plus_one_rows_has_more_and_a_cursor_after_the_last_item() -> None:
    page = Page.from_rows(["r1", "r2", "r3"], limit=2, cursor_after=lambda row: f"after:{row}")

    assert page.items == ["r1", "r2"]
    assert page.has_more is True
    assert page.next_cursor == "after:r2"


@pytest.mark.parametrize("rows", [[], ["r1"], ["r1", "r2"]])
def test_page_with_at_most_limit_rows_is_the_last(rows: list[str]) -> None:
    page = Page.from_rows(rows, limit=2, cursor_after=lambda row: f"after:{row}")

    assert page.items == rows
    assert page.has_more is False
    assert page.next_cursor is None


@pytest.mark.parametrize(("limit", "expected"), [(None, DEFAULT_PAGE_LIMIT), (1, 1), (100, 100), (37, 37)])
def test_valid_limits(limit: int | None, expected: int) -> None:
    assert validate_limit(limit) == expected


@pytest.mark.parametrize("limit", [0, -1, 101, True])
def test_limits_outside_1_to_100_are_refused(limit: int) -> None:
    with pytest.raises(PageLimitInvalid) as caught:
        validate_limit(limit)

    assert caught.value.code == "VALIDATION_FAILED"
