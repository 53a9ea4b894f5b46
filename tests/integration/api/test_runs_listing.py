"""Run list (filters, HMAC cursors), run detail, item pages and the JSON event log."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.integration.api._support_runs import (
    append_events,
    finish_with_outcomes,
    item_of,
    load_run,
    move_run,
    seed_world,
    service,
    start,
    start_confirmed,
    ts,
    uow,
)
from wepush.server.domain import Agent, ItemState, PageRequest, RunState, utc_now


async def test_runs_are_listed_newest_first_and_filtered_by_state_and_job(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        other = await seed_world(app)
        first = await start_confirmed(app, world, key="a")
        second = await start_confirmed(app, world, key="b")
        third = (await start(app, other, {"dryRun": True}, key="c")).json()["id"]
        await move_run(app, world, first, RunState.LEASED, RunState.RUNNING)
        everything = (await app.client.get(world.runs_url(), headers=app.admin())).json()
        running = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"state": "RUNNING"})
        ).json()
        either = (
            await app.client.get(
                world.runs_url(), headers=app.admin(), params=[("state", "RUNNING"), ("state", "PENDING")]
            )
        ).json()
        of_job = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"jobId": other.job.id})
        ).json()

    assert [r["id"] for r in everything["items"]] == [third, second, first]
    assert [r["id"] for r in running["items"]] == [first]
    assert [r["id"] for r in either["items"]] == [third, second, first]
    assert [r["id"] for r in of_job["items"]] == [third]
    assert of_job["items"][0]["dryRun"] is True


async def test_runs_are_filtered_by_creation_time(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        ids = [await start_confirmed(app, world, key=f"k{i}") for i in range(3)]
        runs = [await load_run(app, world, run_id) for run_id in ids]
        middle = runs[1].created_at
        before = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"createdBefore": ts(middle)})
        ).json()
        after = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"createdAfter": ts(middle)})
        ).json()
        window = (
            await app.client.get(
                world.runs_url(),
                headers=app.admin(),
                params={"createdAfter": ts(middle), "createdBefore": ts(middle + timedelta(microseconds=1))},
            )
        ).json()

    assert [r["id"] for r in before["items"]] == [ids[0]]
    assert [r["id"] for r in after["items"]] == [ids[2], ids[1]]
    assert [r["id"] for r in window["items"]] == [ids[1]]


async def test_run_pages_follow_an_hmac_cursor_bound_to_the_filters(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        ids = [await start_confirmed(app, world, key=f"k{i}") for i in range(3)]
        first = (await app.client.get(world.runs_url(), headers=app.admin(), params={"limit": 2})).json()
        cursor = first["page"]["nextCursor"]
        second = (
            await app.client.get(world.runs_url(), headers=app.admin(), params={"limit": 2, "cursor": cursor})
        ).json()
        reused = await app.client.get(
            world.runs_url(), headers=app.admin(), params={"limit": 2, "cursor": cursor, "state": "PENDING"}
        )

    assert [r["id"] for r in first["items"]] == [ids[2], ids[1]]
    assert first["page"]["hasMore"] is True
    assert [r["id"] for r in second["items"]] == [ids[0]]
    assert second["page"] == {"nextCursor": None, "hasMore": False}
    assert reused.status_code == 400
    assert reused.json()["code"] == "CURSOR_INVALID"


async def test_run_detail_reports_counts_timing_and_rate_of_a_finished_run(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await finish_with_outcomes(
            app,
            world,
            run_id,
            {
                "13800000001": ItemState.SUCCEEDED,
                "13800000002": ItemState.FAILED,
                "13800000003": ItemState.UNKNOWN,
                "13800000004": ItemState.SUCCEEDED,
            },
        )
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        missing = await app.client.get(
            world.runs_url("01900000-0000-7000-8000-000000000000"), headers=app.admin()
        )

    assert detail["state"] == "PARTIAL"
    assert detail["counts"]["total"] == 4
    assert (detail["counts"]["succeeded"], detail["counts"]["failed"], detail["counts"]["unknown"]) == (
        2,
        1,
        1,
    )
    assert detail["counts"]["pending"] == detail["counts"]["inFlight"] == 0
    assert detail["startedAt"] is not None
    assert detail["endedAt"] is not None
    assert detail["duration"].startswith("PT")
    assert detail["rate"]["limitPerSecond"] is None
    assert detail["allowedCommands"] == []
    assert "lease" not in detail
    assert missing.status_code == 404


async def test_items_are_paged_in_sequence_order_and_filtered_by_state(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await finish_with_outcomes(
            app,
            world,
            run_id,
            {
                "13800000001": ItemState.SUCCEEDED,
                "13800000002": ItemState.FAILED,
                "13800000003": ItemState.UNKNOWN,
                "13800000004": ItemState.FAILED,
            },
        )
        url = world.runs_url(run_id, "items")
        page1 = (await app.client.get(url, headers=app.admin(), params={"limit": 3})).json()
        page2 = (
            await app.client.get(
                url, headers=app.admin(), params={"limit": 3, "cursor": page1["page"]["nextCursor"]}
            )
        ).json()
        failed = (await app.client.get(url, headers=app.admin(), params={"state": "FAILED"})).json()

    assert [i["sequence"] for i in page1["items"]] == [1, 2, 3]
    assert [i["sequence"] for i in page2["items"]] == [4]
    assert [i["itemId"] for i in failed["items"]] == [
        item_of(world, run_id, "13800000002"),
        item_of(world, run_id, "13800000004"),
    ]
    assert failed["items"][0]["attempts"] == 1
    assert failed["items"][0]["completedAt"] is not None
    # Who failed, in the audience's own ids: the run's item ids are opaque.
    assert [i["recipientItemId"] for i in failed["items"]] == ["13800000002", "13800000004"]
    assert [i["recipientItemId"] for i in page1["items"] + page2["items"]] == [
        "13800000001",
        "13800000002",
        "13800000003",
        "13800000004",
    ]


async def test_an_items_last_attempt_is_never_after_its_completion(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await finish_with_outcomes(
            app, world, run_id, {"13800000001": ItemState.SUCCEEDED, "13800000002": ItemState.FAILED}
        )
        items = (await app.client.get(world.runs_url(run_id, "items"), headers=app.admin())).json()["items"]

    assert len(items) == 2
    for item in items:
        # The attempt ended when the item completed; the moment its result was stored is later still.
        assert item["completedAt"] is not None
        assert item["lastAttemptAt"] == item["completedAt"]


async def test_the_event_log_pages_after_a_sequence(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await append_events(app, world, run_id, "RUN_LEASED", "RUN_STARTED", "PROGRESS", data={"n": 1})
        url = world.runs_url(run_id, "event-log")
        after = (await app.client.get(url, headers=app.admin(), params={"afterSequence": 2})).json()
        first = (await app.client.get(url, headers=app.admin(), params={"limit": 2})).json()
        rest = (
            await app.client.get(
                url, headers=app.admin(), params={"limit": 2, "cursor": first["page"]["nextCursor"]}
            )
        ).json()

    assert [(e["sequence"], e["type"]) for e in after["items"]] == [(3, "RUN_STARTED"), (4, "PROGRESS")]
    assert after["items"][0]["runId"] == run_id
    assert [e["sequence"] for e in first["items"] + rest["items"]] == [1, 2, 3, 4]


async def test_an_event_position_older_than_retention_is_gone(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await append_events(app, world, run_id, "RUN_LEASED", "RUN_STARTED")
        async with uow(app)() as unit:
            page = await unit.run_events.list_page(run_id, PageRequest(limit=10))
            cutoff = page.items[1].occurred_at
            await unit.run_events.purge_before(cutoff, 10)
        url = world.runs_url(run_id, "event-log")
        expired = await app.client.get(url, headers=app.admin(), params={"afterSequence": 0})
        current = await app.client.get(url, headers=app.admin(), params={"afterSequence": 1})

    assert expired.status_code == 410
    assert expired.json()["code"] == "CURSOR_EXPIRED"
    assert current.status_code == 200
    assert [e["sequence"] for e in current.json()["items"]] == [2, 3]


async def test_the_detail_of_a_leased_run_names_its_agent_and_lease(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        now = utc_now()
        agent = Agent(
            workspace_id=world.workspace_id,
            display_name="worker-01",
            agent_version="1.0.0",
            created_at=now,
            updated_at=now,
        )
        async with uow(app)() as unit:
            await unit.agents.add(agent)
            claimed = await unit.leases.claim(
                world.workspace_id,
                run_id,
                agent.id,
                expires_at=now + timedelta(minutes=1),
                ack_deadline=now + timedelta(seconds=30),
            )
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert claimed is not None
    assert detail["state"] == "LEASED"
    assert detail["allowedCommands"] == ["CANCEL"]  # kept for the agent until its engine runs
    assert detail["agent"] == {"agentId": agent.id, "displayName": "worker-01"}
    assert detail["lease"]["leaseId"] == claimed.lease.id
    assert (detail["lease"]["epoch"], detail["lease"]["state"]) == (1, "ACTIVE")


async def test_a_live_runs_in_flight_figure_is_its_latest_progress_events(tmp_path: Path) -> None:
    """Not an estimate from the concurrency permits: a paused run with nothing open showed 10 in flight
    while its event stream said otherwise."""
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
        before_progress = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        await append_events(app, world, run_id, "PROGRESS", data={"inFlight": 3, "pending": 1})
        await append_events(app, world, run_id, "PROGRESS", data={"inFlight": 1, "pending": 3})
        await move_run(app, world, run_id, RunState.PAUSED)
        paused = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert (before_progress["counts"]["inFlight"], before_progress["counts"]["pending"]) == (0, 4)
    assert (paused["counts"]["inFlight"], paused["counts"]["pending"]) == (1, 3)
    assert paused["counts"]["total"] == 4
