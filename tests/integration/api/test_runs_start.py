"""Run confirmation and start: the token bound to resource versions, idempotent starts, dry runs."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from tests.integration.api._support import issue_token
from tests.integration.api._support_runs import (
    ManualClock,
    confirm,
    load_run,
    seed_world,
    service,
    start,
    start_confirmed,
    uow,
    use_clock,
)
from wepush.server.domain import PageRequest, RunState


async def test_confirmation_shows_the_impact_and_a_five_minute_token(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(
            app,
            policies={
                "concurrency": {"min": 1, "max": 8, "target": 2},
                "rateLimit": {"permitsPerSecond": 0.05},
            },
        )
        clock = ManualClock()
        use_clock(app, clock)
        body = await confirm(app, world)

    assert body["jobId"] == world.job.id
    assert (body["providerId"], body["accountId"], body["accountName"]) == (
        "wepush.fake",
        world.account.id,
        world.account.name,
    )
    assert (body["messageId"], body["messageRevision"]) == (world.message.id, 1)
    assert (body["audienceSnapshotId"], body["recipientCount"]) == (world.snapshot.id, 4)
    assert body["policies"]["concurrency"] == {"min": 1, "max": 8, "target": 2}
    # 4 recipients at 0.05 per second.
    assert body["estimatedDuration"] == "PT1M20S"
    assert body["dryRun"] is False
    expires = datetime.fromisoformat(body["expiresAt"])
    assert timedelta(minutes=4, seconds=58) <= expires - clock.now <= timedelta(minutes=5)


async def test_an_unlimited_rate_gives_no_estimate(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        body = await confirm(app, world)
    assert body["estimatedDuration"] is None


async def test_a_rate_too_slow_to_estimate_gives_no_estimate_rather_than_an_error(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        answers = [
            await app.client.post(
                world.job_url("run-confirmation"),
                headers=app.admin(),
                json={"policyOverrides": {"rateLimit": {"permitsPerSecond": rate}}},
            )
            for rate in (1e-300, 5e-324)
        ]
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert [a.json()["estimatedDuration"] for a in answers] == [None, None]


async def test_a_real_start_without_a_token_is_refused_as_confirmation_required(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await start(app, world, {"reason": "manual"})
        async with uow(app)(read_only=True) as unit:
            runs = await unit.runs.list_page(world.workspace_id, PageRequest(limit=10))
    assert response.status_code == 400
    assert response.json()["code"] == "CONFIRMATION_REQUIRED"
    assert runs.items == []


async def test_a_confirmed_start_creates_a_pending_run_with_its_snapshot_and_event(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        response = await start(app, world, {"confirmationToken": token, "reason": "manual"})
        body = response.json()
        detail = (await app.client.get(body["links"]["self"], headers=app.admin())).json()
        events = (await app.client.get(world.runs_url(body["id"], "event-log"), headers=app.admin())).json()
        audit = (
            await app.client.get(
                f"/api/v1/workspaces/{world.workspace_id}/audit-events",
                headers=app.admin(),
                params={"action": "run.start"},
            )
        ).json()

    assert response.status_code == 202
    assert response.headers["location"] == f"/api/v1/workspaces/{world.workspace_id}/runs/{body['id']}"
    assert body["state"] == "PENDING"
    assert body["links"]["events"] == body["links"]["self"] + "/events"
    assert detail["state"] == "PENDING"
    assert detail["trigger"] == "MANUAL"
    assert detail["reason"] == "manual"
    assert detail["allowedCommands"] == ["CANCEL"]
    assert detail["snapshot"]["accountId"] == world.account.id
    assert detail["snapshot"]["audienceRevision"] == world.snapshot.revision
    assert detail["counts"]["total"] == 4
    assert detail["counts"]["pending"] == 4
    assert detail["concurrency"] == {"current": 0, "target": 4, "min": 1, "max": 10}
    assert [e["type"] for e in events["items"]] == ["RUN_CREATED"]
    assert [e["resourceId"] for e in audit["items"]] == [body["id"]]


async def test_changing_the_job_after_confirmation_refuses_the_start(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        async with uow(app)() as unit:
            job = await unit.jobs.get(world.workspace_id, world.job.id)
            await unit.jobs.update(replace(job, name="renamed by someone else"))
        refused = await start(app, world, {"confirmationToken": token})
        fresh = (await confirm(app, world))["confirmationToken"]
        accepted = await start(app, world, {"confirmationToken": fresh}, key="key-2")

    assert refused.status_code == 409
    assert refused.json()["code"] == "CONFIRMATION_INVALID"
    assert "changed" in refused.json()["detail"]
    assert accepted.status_code == 202


async def test_changing_the_account_after_confirmation_refuses_the_start(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        async with uow(app)() as unit:
            account = await unit.accounts.get(world.workspace_id, world.account.id)
            await unit.accounts.update(replace(account, config={"name": "other"}))
        refused = await start(app, world, {"confirmationToken": token})
    assert refused.status_code == 409
    assert refused.json()["code"] == "CONFIRMATION_INVALID"


async def test_an_expired_token_refuses_the_start(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        clock = ManualClock()
        use_clock(app, clock)
        token = (await confirm(app, world))["confirmationToken"]
        clock.advance(timedelta(minutes=5, seconds=1))
        refused = await start(app, world, {"confirmationToken": token})
    assert refused.status_code == 409
    assert refused.json()["code"] == "CONFIRMATION_INVALID"
    assert "expired" in refused.json()["detail"]


async def test_a_token_bound_to_other_overrides_refuses_the_start(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world, {"policyOverrides": {"concurrency": {"target": 2}}}))[
            "confirmationToken"
        ]
        refused = await start(
            app, world, {"confirmationToken": token, "policyOverrides": {"concurrency": {"target": 3}}}
        )
        accepted = await start(
            app,
            world,
            {"confirmationToken": token, "policyOverrides": {"concurrency": {"target": 2}}},
            key="k2",
        )
        detail = (await app.client.get(accepted.json()["links"]["self"], headers=app.admin())).json()
    assert refused.status_code == 409
    assert refused.json()["code"] == "CONFIRMATION_INVALID"
    assert accepted.status_code == 202
    assert detail["concurrency"]["target"] == 2


async def test_a_token_confirmed_for_a_dry_run_cannot_start_a_real_send(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        confirmed = await confirm(app, world, {"dryRun": True})
        refused = await start(
            app, world, {"dryRun": False, "confirmationToken": confirmed["confirmationToken"]}
        )
    assert confirmed["dryRun"] is True
    assert (refused.status_code, refused.json()["code"]) == (409, "CONFIRMATION_INVALID")
    assert "it confirmed a dry run, not a real send" in refused.json()["detail"]


async def test_a_token_confirmed_without_the_overrides_asked_for_says_what_may_differ(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        confirmed = await confirm(app, world)
        refused = await start(
            app,
            world,
            {
                "confirmationToken": confirmed["confirmationToken"],
                "policyOverrides": {"concurrency": {"min": 1, "max": 2, "target": 1}},
            },
        )
    assert (refused.status_code, refused.json()["code"]) == (409, "CONFIRMATION_INVALID")
    assert "other policyOverrides than were confirmed" in refused.json()["detail"]


async def test_a_forged_token_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        payload, tag = token.split(".")
        refused = await start(app, world, {"confirmationToken": payload + "." + tag[::-1]})
    assert refused.status_code == 409
    assert refused.json()["code"] == "CONFIRMATION_INVALID"


async def test_the_same_idempotency_key_returns_the_same_run(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        first = await start(app, world, {"confirmationToken": token}, key="retry-me")
        second = await start(app, world, {"confirmationToken": token}, key="retry-me")
        different = await start(app, world, {"confirmationToken": token, "reason": "other"}, key="retry-me")
        listing = (await app.client.get(world.runs_url(), headers=app.admin())).json()

    assert first.status_code == second.status_code == 202
    assert second.json() == first.json()
    assert different.status_code == 409
    assert different.json()["code"] == "IDEMPOTENCY_CONFLICT"
    assert [r["id"] for r in listing["items"]] == [first.json()["id"]]


async def test_one_confirmation_starts_one_run_whatever_the_idempotency_key(tmp_path: Path) -> None:
    # A client that makes a new key per click must not send to the whole audience twice.
    async with service(tmp_path) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        first = await start(app, world, {"confirmationToken": token}, key="click-1")
        racing = await asyncio.gather(
            *(start(app, world, {"confirmationToken": token}, key=f"click-{n}") for n in (2, 3))
        )
        replay = await start(app, world, {"confirmationToken": token}, key="click-1")
        fresh = (await confirm(app, world))["confirmationToken"]
        again = await start(app, world, {"confirmationToken": fresh}, key="click-4")
        dry = [await start(app, world, {"dryRun": True}, key=f"dry-{n}") for n in (1, 2)]
        listing = (await app.client.get(world.runs_url(), headers=app.admin())).json()

    assert first.status_code == 202
    for refused in racing:
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "CONFIRMATION_INVALID"
        assert first.json()["id"] in refused.json()["detail"]
    assert replay.json() == first.json()
    assert again.status_code == 202
    assert [r.status_code for r in dry] == [202, 202]
    assert len(listing["items"]) == 4


async def test_the_idempotency_key_is_required(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await app.client.post(world.job_url("runs"), headers=app.admin(), json={"dryRun": True})
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_FAILED"


async def test_a_dry_run_needs_no_confirmation(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await start(app, world, {"dryRun": True})
        run = await load_run(app, world, response.json()["id"])
    assert response.status_code == 202
    assert run.dry_run is True
    assert run.state is RunState.PENDING


async def test_overrides_cannot_widen_the_jobs_concurrency_range(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await app.client.post(
            world.job_url("run-confirmation"),
            headers=app.admin(),
            json={"policyOverrides": {"concurrency": {"target": 50}}},
        )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "VALIDATION_FAILED"
    assert body["allowedRange"] == {"min": 1, "max": 10}
    assert body["errors"][0]["field"] == "/policyOverrides/concurrency/target"


async def test_an_override_duration_too_long_to_read_is_a_validation_error_naming_it(tmp_path: Path) -> None:
    """The contract's Duration pattern admits more than a timedelta holds; with a jitter beside it the
    duration is read before the policies are validated, and that read must answer 400, not 500."""
    huge = "P99999999999999D"
    cases = [
        ({"initialDelay": huge, "jitter": "PT1S"}, "/policyOverrides/retry/initialDelay"),
        ({"initialDelay": "PT1S", "jitter": huge}, "/policyOverrides/retry/jitter"),
    ]
    async with service(tmp_path) as app:
        world = await seed_world(app)
        answers = []
        for index, (retry, field) in enumerate(cases):
            body = {"policyOverrides": {"retry": retry}}
            answers.append(
                (
                    await app.client.post(world.job_url("run-confirmation"), headers=app.admin(), json=body),
                    field,
                )
            )
            answers.append((await start(app, world, {**body, "dryRun": True}, key=f"huge-{index}"), field))
    for response, field in answers:
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["code"] == "VALIDATION_FAILED"
        assert [(e["field"], e["code"]) for e in problem["errors"]] == [(field, "MALFORMED")]


async def test_a_viewer_cannot_start_a_run(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        _, viewer = await issue_token(app, world.workspace_id, "VIEWER")
        confirmation = await app.client.post(world.job_url("run-confirmation"), headers=viewer, json={})
        refused = await start(app, world, {"dryRun": True}, headers=viewer)
    assert confirmation.status_code == 403
    assert refused.status_code == 403
    assert refused.json()["code"] == "ACCESS_DENIED"


async def test_a_run_of_an_unknown_job_is_not_found(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await app.client.post(
            f"/api/v1/workspaces/{world.workspace_id}/jobs/01900000-0000-7000-8000-000000000000/run-confirmation",
            headers=app.admin(),
            json={},
        )
        run_id = await start_confirmed(app, world)
    assert response.status_code == 404
    assert run_id


async def test_a_confirmation_needs_no_body(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        response = await app.client.post(world.job_url("run-confirmation"), headers=app.admin())
    assert response.status_code == 200
    assert response.json()["dryRun"] is False
    assert response.json()["recipientCount"] == 4
