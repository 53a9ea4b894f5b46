"""Resend: confirmation with the matching count, a new run limited to exactly those items, copying the
source run's snapshot rather than the current resources."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.helpers_app import RunningApp
from tests.integration.api._support_runs import (
    World,
    finish_with_outcomes,
    item_of,
    load_run,
    move_run,
    seed_world,
    service,
    start_confirmed,
    until_ended,
    uow,
)
from wepush.server.application.execution import item_id_for
from wepush.server.domain import ItemState, PageRequest, RunState, new_id, utc_now
from wepush.server.domain.secrets import secret_record_of

OUTCOMES = {
    "13800000001": ItemState.SUCCEEDED,
    "13800000002": ItemState.FAILED,
    "13800000003": ItemState.UNKNOWN,
    "13800000004": ItemState.UNSENT,
}


async def _finished_run(app: RunningApp, world: World) -> str:
    run_id = await start_confirmed(app, world, key="source")
    await finish_with_outcomes(app, world, run_id, OUTCOMES)
    return run_id


async def test_resend_confirmation_counts_the_matching_items(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await _finished_run(app, world)
        response = await app.client.post(
            world.runs_url(run_id, "resend-confirmation"),
            headers=app.admin(),
            json={"outcomes": ["FAILED", "UNKNOWN"]},
        )
        everything = await app.client.post(
            world.runs_url(run_id, "resend-confirmation"),
            headers=app.admin(),
            json={"outcomes": ["UNSENT", "FAILED", "UNKNOWN"]},
        )
    assert response.status_code == 200
    body = response.json()
    assert (body["sourceRunId"], body["outcomes"], body["matchingItems"]) == (
        run_id,
        ["FAILED", "UNKNOWN"],
        2,
    )
    assert body["confirmationToken"]
    assert body["expiresAt"]
    assert everything.json()["matchingItems"] == 3


async def test_a_resend_run_is_limited_to_exactly_the_matching_items_and_copies_the_snapshot(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await _finished_run(app, world)
        source = await load_run(app, world, run_id)
        # The account changes after the source run: the resend must still use what the source froze.
        async with uow(app)() as unit:
            account = await unit.accounts.get(world.workspace_id, world.account.id)
            await unit.accounts.update(replace(account, config={"name": "changed later"}))
        outcomes = ["FAILED", "UNKNOWN", "UNSENT"]
        token = (
            await app.client.post(
                world.runs_url(run_id, "resend-confirmation"),
                headers=app.admin(),
                json={"outcomes": outcomes},
            )
        ).json()["confirmationToken"]
        response = await app.client.post(
            world.runs_url(run_id, "resend"),
            headers={**app.admin(), "Idempotency-Key": "resend-1"},
            json={"outcomes": outcomes, "confirmationToken": token, "reason": "second try"},
        )
        new_id = response.json()["id"]
        detail = (await app.client.get(world.runs_url(new_id), headers=app.admin())).json()
        resend = await load_run(app, world, new_id)
        async with uow(app)(read_only=True) as unit:
            retry = await unit.run_items.list_retry_items(new_id, PageRequest(limit=10))

    assert response.status_code == 202
    assert response.headers["location"].endswith(f"/runs/{new_id}")
    assert (detail["trigger"], detail["sourceRunId"], detail["state"]) == ("RESEND", run_id, "PENDING")
    assert detail["counts"]["total"] == 3
    assert [(i.source_item_id, i.sequence) for i in retry.items] == [
        (item_of(world, run_id, "13800000002"), 2),
        (item_of(world, run_id, "13800000003"), 3),
        (item_of(world, run_id, "13800000004"), 4),
    ]
    assert resend.snapshot["account"] == source.snapshot["account"]
    assert resend.snapshot["account"]["config"] == {"name": "fake"}
    assert resend.snapshot["resendOf"] == {"runId": run_id, "outcomes": ["FAILED", "UNKNOWN", "UNSENT"]}


async def _seal(app: RunningApp, world: World, name: str, value: str, record_version: int) -> None:
    """Seal ``value`` as the account's secret ``name``, replacing the record there (as REPLACE does)."""
    assert app.runtime.deps is not None
    store = app.runtime.deps.secret_store
    now = utc_now()
    async with uow(app)() as unit:
        found = await unit.secret_records.find(world.workspace_id, "ACCOUNT", world.account.id, name)
        if found is not None:
            await unit.secret_records.delete(world.workspace_id, found.id, found.version)
        record_id = new_id()
        sealed = store.encrypt(world.workspace_id, record_id, name, record_version, value.encode())
        await unit.secret_records.add(
            secret_record_of(
                sealed,
                record_id=record_id,
                workspace_id=world.workspace_id,
                owner_type="ACCOUNT",
                owner_id=world.account.id,
                name=name,
                record_version=record_version,
                created_at=now,
                updated_at=now,
            )
        )


async def test_a_resend_after_its_secret_was_replaced_is_refused_before_a_token_is_issued(
    tmp_path: Path,
) -> None:
    """A resend sends with the source run's frozen account, whose secret the store no longer holds:
    every item would fail at the provider session. Refused with a reason that names the way out."""
    async with service(tmp_path) as app:
        world = await seed_world(app, account_config={"name": "fake", "token": {"$secret": "token"}})
        await _seal(app, world, "token", "rejected-by-the-vendor", 1)
        run_id = await _finished_run(app, world)
        kept = await app.client.post(
            world.runs_url(run_id, "resend-confirmation"), headers=app.admin(), json={"outcomes": ["FAILED"]}
        )
        await _seal(app, world, "token", "the-fixed-one", 2)
        refused = await app.client.post(
            world.runs_url(run_id, "resend-confirmation"), headers=app.admin(), json={"outcomes": ["FAILED"]}
        )
        # A token issued before the replacement does not get a run created either.
        late = await app.client.post(
            world.runs_url(run_id, "resend"),
            headers={**app.admin(), "Idempotency-Key": "resend-late"},
            json={"outcomes": ["FAILED"], "confirmationToken": kept.json()["confirmationToken"]},
        )
        async with uow(app)(read_only=True) as unit:
            runs = await unit.runs.list_page(world.workspace_id, PageRequest(limit=10))

    assert kept.status_code == 200
    for answer in (refused, late):
        assert answer.status_code == 409, answer.text
        problem = answer.json()
        assert problem["code"] == "VERSION_CONFLICT"
        assert "'token'" in problem["detail"]
        assert "new run from the job" in problem["detail"]
        assert "fixed" not in answer.text
        assert "rejected-by" not in answer.text
    assert [run.id for run in runs.items] == [run_id]


async def test_a_resend_token_for_other_outcomes_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await _finished_run(app, world)
        token = (
            await app.client.post(
                world.runs_url(run_id, "resend-confirmation"),
                headers=app.admin(),
                json={"outcomes": ["FAILED"]},
            )
        ).json()["confirmationToken"]
        response = await app.client.post(
            world.runs_url(run_id, "resend"),
            headers={**app.admin(), "Idempotency-Key": "resend-1"},
            json={"outcomes": ["FAILED", "UNKNOWN"], "confirmationToken": token},
        )
    assert response.status_code == 409
    assert response.json()["code"] == "CONFIRMATION_INVALID"
    assert "the outcomes asked for differ from the confirmed ones" in response.json()["detail"]


async def test_an_unfinished_run_cannot_be_resent(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
        response = await app.client.post(
            world.runs_url(run_id, "resend-confirmation"), headers=app.admin(), json={"outcomes": ["FAILED"]}
        )
    assert response.status_code == 409
    assert response.json()["code"] == "RUN_STATE_CONFLICT"
    assert response.json()["currentState"] == "RUNNING"


async def test_nothing_to_resend_is_a_validation_failure(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        await finish_with_outcomes(app, world, run_id, {key: ItemState.SUCCEEDED for key in OUTCOMES})
        confirmation = (
            await app.client.post(
                world.runs_url(run_id, "resend-confirmation"),
                headers=app.admin(),
                json={"outcomes": ["FAILED"]},
            )
        ).json()
        response = await app.client.post(
            world.runs_url(run_id, "resend"),
            headers={**app.admin(), "Idempotency-Key": "resend-1"},
            json={"outcomes": ["FAILED"], "confirmationToken": confirmation["confirmationToken"]},
        )
    assert confirmation["matchingItems"] == 0
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "NO_MATCHING_ITEMS"


async def test_cancelling_a_pending_resend_marks_only_its_items_unsent(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await _finished_run(app, world)
        token = (
            await app.client.post(
                world.runs_url(run_id, "resend-confirmation"),
                headers=app.admin(),
                json={"outcomes": ["FAILED"]},
            )
        ).json()["confirmationToken"]
        new_id = (
            await app.client.post(
                world.runs_url(run_id, "resend"),
                headers={**app.admin(), "Idempotency-Key": "resend-1"},
                json={"outcomes": ["FAILED"], "confirmationToken": token},
            )
        ).json()["id"]
        cancel = await app.client.post(world.runs_url(new_id, "commands", "cancel"), headers=app.admin())
        cancelled = await until_ended(app, world, new_id)
        items = (await app.client.get(world.runs_url(new_id, "items"), headers=app.admin())).json()

    assert cancel.status_code == 202
    assert (cancelled.counts.total, cancelled.counts.unsent) == (1, 1)
    assert [(i["itemId"], i["sequence"], i["state"]) for i in items["items"]] == [
        (item_id_for(new_id, world.snapshot.id, 2), 2, "UNSENT")
    ]
