"""The SSE decoder follows the WHATWG event-stream parsing rules, whatever the chunk boundaries."""

from __future__ import annotations

import pytest

from wepush.sdk.remote import ServerSentEvent, SSEDecoder


def decode_all(*chunks: str, last_event_id: str = "") -> list[ServerSentEvent]:
    decoder = SSEDecoder(last_event_id)
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


STREAM = (
    ": heartbeat\n\n"
    'id: 121\nevent: progress\ndata: {"a":\ndata: 1}\n\n'
    "data: plain message\n\n"
    "id: 122\nevent: run_completed\ndata: done\n\n"
)


def test_event_fields_and_multi_line_data() -> None:
    events = decode_all(STREAM)

    assert events == [
        ServerSentEvent(event="progress", data='{"a":\n1}', id="121", last_event_id="121"),
        ServerSentEvent(event="message", data="plain message", id=None, last_event_id="121"),
        ServerSentEvent(event="run_completed", data="done", id="122", last_event_id="122"),
    ]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_ending_is_accepted(newline: str) -> None:
    assert decode_all(STREAM.replace("\n", newline)) == decode_all(STREAM)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_chunk_boundaries_anywhere_give_the_same_events(newline: str) -> None:
    text = STREAM.replace("\n", newline)

    one_char_at_a_time = decode_all(*text)

    assert one_char_at_a_time == decode_all(STREAM)


def test_crlf_split_between_chunks_is_one_line_break() -> None:
    events = decode_all("data: x\r", "\ndata: y\r", "\n\r", "\n")

    assert [event.data for event in events] == ["x\ny"]


def test_comments_and_unknown_fields_are_ignored() -> None:
    events = decode_all(": heartbeat\n", "colour: blue\n", "data: kept\n", ":another\n\n")

    assert [(event.event, event.data) for event in events] == [("message", "kept")]


def test_block_without_data_is_not_dispatched_but_its_id_is_kept() -> None:
    decoder = SSEDecoder()

    assert decoder.feed("id: 5\nevent: progress\n\n") == []
    assert decoder.last_event_id == "5"
    (event,) = decoder.feed("data: next\n\n")
    assert (event.event, event.id, event.last_event_id) == ("message", None, "5")


def test_empty_data_field_dispatches_an_empty_event() -> None:
    (event,) = decode_all("data\n\n")

    assert event.data == ""


def test_only_one_leading_space_is_removed_from_values() -> None:
    (event,) = decode_all("data:  two spaces\n\n")

    assert event.data == " two spaces"


def test_id_containing_null_is_ignored() -> None:
    decoder = SSEDecoder("9")

    decoder.feed("id: 1\0 0\ndata: x\n\n")

    assert decoder.last_event_id == "9"


def test_retry_sets_the_reconnection_time_only_when_numeric() -> None:
    decoder = SSEDecoder()

    decoder.feed("retry: 2500\n\n")
    decoder.feed("retry: soon\n\n")

    assert decoder.retry_ms == 2500


def test_leading_byte_order_mark_is_skipped() -> None:
    (event,) = decode_all("\ufeffdata: x\n\n")

    assert event.data == "x"


def test_reset_discards_the_unfinished_event_and_its_id() -> None:
    decoder = SSEDecoder()
    decoder.feed("id: 3\ndata: complete\n\nid: 4\ndata: half")

    decoder.reset()
    events = decoder.feed("data: fresh\n\n")

    assert [(event.data, event.last_event_id) for event in events] == [("fresh", "3")]
    assert decoder.last_event_id == "3"
