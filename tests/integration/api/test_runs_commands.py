"""Run commands: legality against the state machine, persistence, idempotency, the PENDING cancel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.integration.api._support_runs import (
    RECIPIENTS,
    item_of,
    load_run,
    move_run,
    seed_world,
    service,
    start_confirmed,
    until_ended,
    uow,
)
from wepush.server.domain import ItemState, PageRequest, RunState


async def test_an_illegal_command_names_the_current_state_and_the_allowed_commands(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        pending = await app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin())
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING, RunState.SUCCEEDED)
        finished = await app.client.post(world.runs_url(run_id, "commands", "resume"), headers=app.admin())

    assert pending.status_code == 409
    assert pending.json()["code"] == "RUN_STATE_CONFLICT"
    assert pending.json()["currentState"] == "PENDING"
    assert pending.json()["allowedCommands"] == ["CANCEL"]
    assert finished.status_code == 409
    assert finished.json()["currentState"] == "SUCCEEDED"
    assert finished.json()["allowedCommands"] == []


async def test_a_command_on_a_running_run_is_persisted_and_waits_for_the_executor(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
        accepted = await app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin())
        command_id = accepted.json()["commandId"]
        command = await app.client.get(world.runs_url(run_id, "commands", command_id), headers=app.admin())
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        # The executor acknowledges it and reports the pause; the run then lists what a paused run allows.
        async with uow(app)() as unit:
            await unit.run_commands.record_ack(command_id, applied=True, result_message=None)
        await move_run(app, world, run_id, RunState.PAUSED)
        applied = (
            await app.client.get(world.runs_url(run_id, "commands", command_id), headers=app.admin())
        ).json()
        paused = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert accepted.status_code == 202
    assert accepted.json()["type"] == "PAUSE"
    assert accepted.json()["state"] == "ACCEPTED"
    assert command.status_code == 200
    assert command.json()["runId"] == run_id
    assert command.json()["state"] == "ACCEPTED"
    assert detail["state"] == "RUNNING"
    assert detail["allowedCommands"] == ["PAUSE", "CANCEL", "CHANGE_CONCURRENCY"]
    assert applied["state"] == "APPLIED"
    assert applied["acknowledgedAt"] is not None
    assert paused["allowedCommands"] == ["RESUME", "CANCEL", "CHANGE_CONCURRENCY"]


async def test_a_repeated_command_with_the_same_key_returns_the_first_result(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
        url = world.runs_url(run_id, "commands", "cancel")
        headers = {**app.admin(), "Idempotency-Key": "cancel-once"}
        first = await app.client.post(url, headers=headers, json={"reason": "wrong audience"})
        # Meanwhile the executor reported the cancellation: the run no longer accepts CANCEL...
        await move_run(app, world, run_id, RunState.CANCELLING)
        again = await app.client.post(url, headers=headers, json={"reason": "wrong audience"})
        fresh = await app.client.post(url, headers=app.admin(), json={"reason": "wrong audience"})
        async with uow(app)(read_only=True) as unit:
            commands = await unit.run_commands.list_for_run(run_id, PageRequest(limit=10))

    assert first.status_code == again.status_code == 202
    # ... yet the retry of the first request replays its result instead of failing.
    assert again.json() == first.json()
    assert fresh.status_code == 409
    assert [(c.command_id, c.payload) for c in commands.items] == [
        (first.json()["commandId"], {"reason": "wrong audience"})
    ]


async def test_cancelling_a_pending_run_answers_at_once_then_ends_it_with_every_item_unsent(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        accepted = await app.client.post(
            world.runs_url(run_id, "commands", "cancel"), headers=app.admin(), json={"reason": "not today"}
        )
        # No agent runs here (QUIET): the Service itself ends a run no agent ever held.
        await until_ended(app, world, run_id)
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        items = (await app.client.get(world.runs_url(run_id, "items"), headers=app.admin())).json()
        events = (await app.client.get(world.runs_url(run_id, "event-log"), headers=app.admin())).json()
        artifacts = (await app.client.get(world.runs_url(run_id, "artifacts"), headers=app.admin())).json()

    assert accepted.status_code == 202
    assert accepted.json()["state"] == "APPLIED"
    assert detail["state"] == "CANCELLED"
    assert detail["stateReason"] == "not today"
    assert detail["allowedCommands"] == []
    assert detail["startedAt"] is None
    assert detail["endedAt"] is not None
    assert detail["counts"] == {
        "total": 4,
        "pending": 0,
        "inFlight": 0,
        "succeeded": 0,
        "failed": 0,
        "unknown": 0,
        "unsent": 4,
        "skipped": 0,
        "retried": 0,
    }
    assert [(i["itemId"], i["sequence"], i["state"]) for i in items["items"]] == [
        (item_of(world, run_id, key), n, ItemState.UNSENT.value) for n, key in enumerate(RECIPIENTS, 1)
    ]
    assert [e["type"] for e in events["items"]] == [
        "RUN_CREATED",
        "RUN_CANCELLING",
        "COMMAND_ACKNOWLEDGED",
        "RUN_COMPLETED",
    ]
    completed = events["items"][3]["data"]
    assert (completed["finalState"], completed["stopReason"], completed["recovered"]) == (
        "CANCELLED",
        "CANCELLED",
        False,
    )
    # Like any cancelled run: the UNSENT file, the results export and the run log.
    assert sorted(a["type"] for a in artifacts["items"]) == ["RESULTS_EXPORT", "RUN_LOG", "UNSENT_ITEMS"]


async def test_a_pending_cancel_holds_no_transaction_for_the_audience(tmp_path: Path) -> None:
    """The cancel request only moves the run to CANCELLING; the items are written by the Service's pass."""
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        # The pass has not run yet when the request commits: stop it, as if it were busy elsewhere.
        runtime = app.runtime
        assert runtime.cancelled_runs is not None
        runtime.cancelled_runs.cancel()
        # Ended before the request: a pass still waking could otherwise finish the run under the test.
        await asyncio.wait([runtime.cancelled_runs], timeout=5)
        assert runtime.cancelled_runs.done()
        accepted = await app.client.post(world.runs_url(run_id, "commands", "cancel"), headers=app.admin())
        cancelling = await load_run(app, world, run_id)
        async with uow(app)(read_only=True) as unit:
            recorded = await unit.run_items.count_by_state(run_id)
        again = await app.client.post(world.runs_url(run_id, "commands", "cancel"), headers=app.admin())

    assert accepted.status_code == 202
    assert accepted.json()["state"] == "APPLIED"
    assert cancelling.state is RunState.CANCELLING
    assert cancelling.cancelled_before_start
    assert recorded == {}
    assert again.status_code == 409
    assert again.json()["currentState"] == "CANCELLING"


async def test_a_concurrency_target_outside_the_range_is_refused_with_the_range(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
        url = world.runs_url(run_id, "commands", "change-concurrency")
        refused = await app.client.post(url, headers=app.admin(), json={"target": 11})
        accepted = await app.client.post(url, headers=app.admin(), json={"target": 7})
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        command = (
            await app.client.get(
                world.runs_url(run_id, "commands", accepted.json()["commandId"]), headers=app.admin()
            )
        ).json()

    assert refused.status_code == 400
    assert refused.json()["code"] == "VALIDATION_FAILED"
    assert refused.json()["allowedRange"] == {"min": 1, "max": 10}
    assert accepted.status_code == 202
    assert command["target"] == 7
    assert command["type"] == "CHANGE_CONCURRENCY"
    assert detail["concurrency"]["target"] == 7


async def test_a_command_for_a_run_of_another_run_id_is_not_found(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        first = await start_confirmed(app, world, key="a")
        second = await start_confirmed(app, world, key="b")
        cancel = await app.client.post(world.runs_url(first, "commands", "cancel"), headers=app.admin())
        crossed = await app.client.get(
            world.runs_url(second, "commands", cancel.json()["commandId"]), headers=app.admin()
        )
    assert cancel.status_code == 202
    assert crossed.status_code == 404


async def test_a_leased_run_takes_a_cancel_for_its_agent_and_refuses_the_rest(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED)
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()
        paused = await app.client.post(world.runs_url(run_id, "commands", "pause"), headers=app.admin())
        cancelled = await app.client.post(
            world.runs_url(run_id, "commands", "cancel"), headers=app.admin(), json={"reason": "too soon"}
        )
        after = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert detail["allowedCommands"] == ["CANCEL"]
    assert paused.status_code == 409
    assert paused.json()["allowedCommands"] == ["CANCEL"]
    # Stored for the agent that holds the lease; it applies it once its engine runs.
    assert cancelled.status_code == 202
    assert cancelled.json()["state"] == "ACCEPTED"
    assert after["state"] == "LEASED"
