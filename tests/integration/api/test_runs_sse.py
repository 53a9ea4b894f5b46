"""The run event stream (SSE) over a real loopback HTTP connection: replay from Last-Event-ID, then live
events, heartbeats, the end after RUN_COMPLETED, and 410 for a purged position."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.integration.api._support import issue_token
from tests.integration.api._support_runs import (
    append_events,
    event_hint,
    loopback_service,
    seed_world,
    service,
    start_confirmed,
    until_ended,
    uow,
)
from wepush.server.domain import PageRequest


@dataclass
class Frame:
    id: str | None = None
    event: str | None = None
    data: str = ""
    comments: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse SSE frames (blank-line separated) as they arrive."""
    frame = Frame()
    async for line in response.aiter_lines():
        if line == "":
            yield frame
            frame = Frame()
        elif line.startswith(":"):
            frame.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                frame.data += value
            elif name in ("id", "event"):
                setattr(frame, name, value)


async def test_a_stream_replays_after_last_event_id_then_follows_live_until_completion(
    tmp_path: Path,
) -> None:
    async with loopback_service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await append_events(app, world, run_id, "RUN_LEASED", "RUN_STARTED", "PROGRESS")
        received: list[Frame] = []
        async with app.client.stream(
            "GET", world.runs_url(run_id, "events"), headers={**app.admin(), "Last-Event-ID": "2"}
        ) as response:
            stream = frames(response)
            received += [await anext(stream), await anext(stream)]
            await append_events(app, world, run_id, "PROGRESS", "CONCURRENCY_CHANGED")
            event_hint(app, run_id)
            received += [await anext(stream), await anext(stream)]
            await append_events(app, world, run_id, "RUN_COMPLETED")
            event_hint(app, run_id)
            received += [frame async for frame in stream]

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = [f for f in received if f.id is not None]
    assert [int(f.id or 0) for f in events] == [3, 4, 5, 6, 7]
    assert [f.event for f in events] == [
        "run_started",
        "progress",
        "progress",
        "concurrency_changed",
        "run_completed",
    ]
    first = events[0].json()
    assert (first["runId"], first["sequence"], first["type"]) == (run_id, 3, "RUN_STARTED")


async def test_live_events_arrive_without_a_hint_at_the_next_poll(tmp_path: Path) -> None:
    async with loopback_service(tmp_path, WEPUSH_EVENTS_PROGRESS_INTERVAL="PT0.5S") as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        async with app.client.stream(
            "GET", world.runs_url(run_id, "events"), headers=app.admin(), params={"afterSequence": 1}
        ) as response:
            stream = frames(response)
            # Stored by "another Service instance": no in-process hint, the poller finds it by itself.
            await append_events(app, world, run_id, "RUN_LEASED")
            frame = await asyncio.wait_for(anext(stream), 10)
    assert (frame.id, frame.event) == ("2", "run_leased")


async def test_an_idle_stream_sends_heartbeat_comments(tmp_path: Path) -> None:
    async with loopback_service(tmp_path, WEPUSH_EVENTS_SSE_HEARTBEAT="PT0.1S") as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        async with app.client.stream(
            "GET", world.runs_url(run_id, "events"), headers={**app.admin(), "Last-Event-ID": "1"}
        ) as response:
            stream = frames(response)
            idle = [await asyncio.wait_for(anext(stream), 10) for _ in range(2)]
    assert all(f.comments == ["heartbeat"] and f.id is None for f in idle)


async def test_a_stream_ends_once_its_token_is_revoked(tmp_path: Path) -> None:
    async with loopback_service(tmp_path, WEPUSH_EVENTS_SSE_HEARTBEAT="PT0.1S") as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        token_id, viewer = await issue_token(app, world.workspace_id, "VIEWER")
        tokens = f"/api/v1/workspaces/{world.workspace_id}/api-tokens/{token_id}"
        async with app.client.stream(
            "GET", world.runs_url(run_id, "events"), headers={**viewer, "Last-Event-ID": "1"}
        ) as response:
            stream = frames(response)
            assert (await asyncio.wait_for(anext(stream), 10)).comments == ["heartbeat"]
            revoked = await app.client.delete(tokens, headers=app.admin())
            assert revoked.status_code == 204, revoked.text

            async def rest() -> list[Frame]:
                return [frame async for frame in stream]

            # The run is still PENDING: only the revoked credential can end this stream.
            await asyncio.wait_for(rest(), 10)
        again = await app.client.get(world.runs_url(run_id, "events"), headers=viewer)

    assert again.status_code == 401


async def test_the_stream_of_a_finished_run_replays_and_ends(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await app.client.post(world.runs_url(run_id, "commands", "cancel"), headers=app.admin())
        await until_ended(app, world, run_id)
        # In-process transport: the response only returns because the stream ends by itself.
        response = await app.client.get(world.runs_url(run_id, "events"), headers=app.admin())
        last_one = await app.client.get(
            world.runs_url(run_id, "events"), headers={**app.admin(), "Last-Event-ID": "3"}
        )
        caught_up = await app.client.get(
            world.runs_url(run_id, "events"), headers={**app.admin(), "Last-Event-ID": "4"}
        )

    assert response.status_code == 200
    ids = [line.removeprefix("id: ") for line in response.text.splitlines() if line.startswith("id: ")]
    assert ids == ["1", "2", "3", "4"]
    assert "event: run_completed" in response.text
    assert last_one.status_code == 200
    assert [line for line in last_one.text.splitlines() if line.startswith("id: ")] == ["id: 4"]
    # Everything was sent: 204 tells an event stream client to stop reconnecting, not an empty 200.
    assert caught_up.status_code == 204
    assert caught_up.content == b""


async def test_a_purged_position_is_gone_and_a_bad_last_event_id_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await append_events(app, world, run_id, "RUN_LEASED", "RUN_STARTED")
        async with uow(app)() as unit:
            page = await unit.run_events.list_page(run_id, PageRequest(limit=10))
            await unit.run_events.purge_before(page.items[1].occurred_at, 10)
        url = world.runs_url(run_id, "events")
        expired = await app.client.get(url, headers={**app.admin(), "Last-Event-ID": "0"})
        malformed = [
            await app.client.get(
                url,
                headers=[(k.encode(), v.encode()) for k, v in app.admin().items()]
                + [(b"Last-Event-ID", value)],
            )
            # 0xB2 reads as "²", a digit to str.isdigit but not to int(); the last is beyond 64 bits.
            for value in (b"abc", b"\xb2", b"-1", b"9223372036854775808")
        ]

    assert expired.status_code == 410
    assert expired.json()["code"] == "CURSOR_EXPIRED"
    assert [(r.status_code, r.json()["code"]) for r in malformed] == [(400, "VALIDATION_FAILED")] * 4
