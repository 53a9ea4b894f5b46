"""Run event subscriptions over real SSE connections that drop, replay, expire and heartbeat."""

from __future__ import annotations

import threading

import pytest

from wepush.sdk.remote import (
    AuthenticationRequired,
    CursorExpired,
    ReconnectPolicy,
    RunEventMessage,
    TransportError,
    WePushClient,
)

from ._service import WS, ScriptedService, event_frame, problem, sse, ws_path

EVENTS = ws_path("runs", "run-1", "events")


def sequences(messages: list[RunEventMessage]) -> list[int | None]:
    return [message.sequence for message in messages]


def test_dropped_stream_resumes_from_last_event_id_without_gaps_or_duplicates(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script(
        "GET",
        EVENTS,
        sse(event_frame(1), event_frame(2), event_frame(3), end="drop"),
        # The Service replays from its own position; the SDK drops what it already delivered.
        sse(
            event_frame(2), event_frame(3), event_frame(4), event_frame(5, "RUN_COMPLETED", state="SUCCEEDED")
        ),
    )

    with client.workspace(WS).runs.events("run-1") as subscription:
        received = list(subscription)

    assert sequences(received) == [1, 2, 3, 4, 5]
    assert received[-1].type == "RUN_COMPLETED"
    assert received[-1].terminal
    assert received[-1].event == "run_completed"
    assert received[0].data["data"] == {"succeeded": 1}
    first, second = service.seen("GET", EVENTS)
    assert "Last-Event-ID" not in first.headers
    assert second.headers["Last-Event-ID"] == "3"
    assert second.headers["Accept"] == "text/event-stream"


def test_heartbeats_and_split_frames_are_reassembled_into_events(
    service: ScriptedService, client: WePushClient
) -> None:
    frame = event_frame(8)
    service.script(
        "GET",
        EVENTS,
        sse(
            ": heartbeat\n\n",
            frame[:7],
            frame[7:30],
            frame[30:],
            ": heartbeat\r\n\r\n",
            "retry: 10\n\n",
            event_frame(9, "RUN_COMPLETED").replace("\n", "\r\n"),
            end="hold",
        ),
    )

    with client.workspace(WS).runs.events("run-1", last_event_id="7") as subscription:
        received = list(subscription)

    assert sequences(received) == [8, 9]
    assert received[0].to_model().sequence == 8
    (request,) = service.seen("GET", EVENTS)
    assert request.headers["Last-Event-ID"] == "7"


def test_clean_end_without_terminal_event_reconnects(service: ScriptedService, client: WePushClient) -> None:
    service.script(
        "GET",
        EVENTS,
        sse(event_frame(1), end="close"),
        sse(event_frame(2, "RUN_COMPLETED"), end="close"),
    )

    with client.workspace(WS).runs.events("run-1") as subscription:
        assert sequences(list(subscription)) == [1, 2]

    assert [r.headers.get("Last-Event-ID") for r in service.seen("GET", EVENTS)] == [None, "1"]


def test_expired_cursor_raises_cursor_expired(service: ScriptedService, client: WePushClient) -> None:
    service.script("GET", EVENTS, problem(410, "CURSOR_EXPIRED"))

    with (
        client.workspace(WS).runs.events("run-1", last_event_id="3") as subscription,
        pytest.raises(CursorExpired) as raised,
    ):
        next(subscription)

    assert raised.value.status == 410
    assert len(service.seen("GET", EVENTS)) == 1


def test_cursor_expiring_during_reconnect_is_raised_after_the_delivered_events(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", EVENTS, sse(event_frame(1), end="drop"), problem(410, "CURSOR_EXPIRED"))
    received: list[RunEventMessage] = []

    with client.workspace(WS).runs.events("run-1") as subscription, pytest.raises(CursorExpired):
        received.extend(subscription)

    assert sequences(received) == [1]


def test_service_unavailable_with_retry_after_is_retried(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script(
        "GET",
        EVENTS,
        problem(503, "AGENT_NOT_AVAILABLE", headers={"Retry-After": "0"}),
        sse(event_frame(1, "RUN_COMPLETED")),
    )

    with client.workspace(WS).runs.events("run-1") as subscription:
        assert sequences(list(subscription)) == [1]


def test_authentication_failure_is_not_retried(service: ScriptedService, client: WePushClient) -> None:
    service.script("GET", EVENTS, problem(401, "AUTHENTICATION_REQUIRED"))

    with client.workspace(WS).runs.events("run-1") as subscription, pytest.raises(AuthenticationRequired):
        next(subscription)

    assert len(service.seen("GET", EVENTS)) == 1


def test_consecutive_failed_connections_end_in_transport_error(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", EVENTS, *(sse(end="drop") for _ in range(5)))
    policy = ReconnectPolicy(initial_delay=0.01, max_delay=0.02, max_attempts=2)

    with (
        client.workspace(WS).runs.events("run-1", reconnect=policy) as subscription,
        pytest.raises(TransportError),
    ):
        next(subscription)

    assert len(service.seen("GET", EVENTS)) == 3


def test_close_ends_iteration_of_an_open_stream(service: ScriptedService, client: WePushClient) -> None:
    service.script("GET", EVENTS, sse(event_frame(1), end="hold"))
    subscription = client.workspace(WS).runs.events("run-1")

    assert next(subscription).sequence == 1
    subscription.close()

    assert list(subscription) == []
    assert subscription.last_event_id == "1"


def test_close_from_another_thread_stops_the_reader_at_the_next_heartbeat(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", EVENTS, sse(event_frame(1), end="hold"))
    subscription = client.workspace(WS).runs.events("run-1")
    received: list[RunEventMessage] = []
    reader = threading.Thread(target=lambda: received.extend(subscription))
    reader.start()
    for _ in range(500):
        if received:
            break
        reader.join(0.01)

    subscription.close()
    reader.join(5)

    assert not reader.is_alive()
    assert sequences(received) == [1]


async def test_async_subscription_resumes_after_a_drop(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script(
        "GET",
        EVENTS,
        sse(event_frame(1), event_frame(2), end="drop"),
        sse(event_frame(2), event_frame(3, "RUN_COMPLETED")),
    )

    async with client.workspace(WS).runs.events_async("run-1") as subscription:
        received = [message async for message in subscription]

    assert sequences(received) == [1, 2, 3]
    assert service.seen("GET", EVENTS)[1].headers["Last-Event-ID"] == "2"


async def test_async_subscription_raises_cursor_expired(
    service: ScriptedService, client: WePushClient
) -> None:
    service.script("GET", EVENTS, problem(410, "CURSOR_EXPIRED"))

    async with client.workspace(WS).runs.events_async("run-1", last_event_id="1") as subscription:
        with pytest.raises(CursorExpired):
            await anext(subscription)
