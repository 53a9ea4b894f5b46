"""The audit trail: what was recorded (field names, never values), filters, pages and who may read it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.integration.api._support import (
    API,
    SECRET_VALUE,
    accounts_url,
    create_account,
    create_workspace,
    default_workspace,
    http_account,
    issue_token,
    service,
)
from tests.integration.api._support_runs import seed_world
from tests.integration.api._support_runs import service as runs_service


def audit_url(workspace_id: str) -> str:
    return f"{API}/workspaces/{workspace_id}/audit-events"


async def test_account_changes_are_audited_with_field_names_only(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = await create_account(app, ws, http_account())
        update = {
            "name": "orders",
            "config": {**created["config"], "baseUrl": "https://api2.example.com"},
            "secrets": {"http-account-token": {"operation": "REPLACE", "value": SECRET_VALUE + "-2"}},
            "version": 1,
        }
        assert (
            await app.client.put(accounts_url(ws, created["id"]), headers=app.admin(), json=update)
        ).status_code == 200
        assert (
            await app.client.delete(accounts_url(ws, created["id"]), headers=app.admin())
        ).status_code == 204

        response = await app.client.get(
            audit_url(ws),
            headers=app.admin(),
            params={"resourceType": "ACCOUNT", "resourceId": created["id"]},
        )
        assert response.status_code == 200
        assert SECRET_VALUE not in response.text
        events = {e["action"]: e for e in response.json()["items"]}
        assert list(events) == ["account.delete", "account.update", "account.create"]
        assert events["account.create"]["details"]["fieldNames"] == [
            "config.auth",
            "config.baseUrl",
            "config.connectTimeout",
            "name",
            "providerId",
            "secrets.http-account-token",
        ]
        assert events["account.update"]["details"]["fieldNames"] == [
            "config.baseUrl",
            "secrets.http-account-token",
        ]
        assert events["account.delete"]["details"]["fieldNames"] == ["secrets.http-account-token"]
        actor = events["account.create"]["actor"]
        assert (actor["type"], actor["id"]) == ("USER", "bootstrap-admin")


async def test_filters_by_actor_and_time_and_pages_newest_first(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        operator_id, operator = await issue_token(app, ws, "OPERATOR")
        for index in range(5):
            response = await app.client.post(
                accounts_url(ws), headers=operator, json=http_account(f"a{index}")
            )
            assert response.status_code == 201
        await create_account(app, ws, http_account("by-admin"))

        seen: list[str] = []
        params: dict[str, str | int] = {"actorId": operator_id, "limit": 2}
        while True:
            page = (await app.client.get(audit_url(ws), headers=app.admin(), params=params)).json()
            seen.extend(e["resourceId"] for e in page["items"])
            assert all(e["actor"]["id"] == operator_id for e in page["items"])
            if not page["page"]["hasMore"]:
                break
            params["cursor"] = page["page"]["nextCursor"]
        listed = (await app.client.get(accounts_url(ws), headers=app.admin(), params={"name": "a"})).json()
        operator_accounts = [a["id"] for a in listed["items"] if a["name"] != "by-admin"]
        assert seen == operator_accounts  # both newest first, one event per create

        everything = (await app.client.get(audit_url(ws), headers=app.admin(), params={"limit": 100})).json()
        times = [datetime.fromisoformat(e["occurredAt"]) for e in everything["items"]]
        assert times == sorted(times, reverse=True)
        middle = times[len(times) // 2]
        bound = middle.isoformat()
        later = (
            await app.client.get(
                audit_url(ws), headers=app.admin(), params={"occurredAfter": bound, "limit": 100}
            )
        ).json()
        assert [datetime.fromisoformat(e["occurredAt"]) for e in later["items"]] == [
            t for t in times if t > middle
        ]
        earlier = (
            await app.client.get(
                audit_url(ws), headers=app.admin(), params={"occurredBefore": bound, "limit": 100}
            )
        ).json()
        assert [datetime.fromisoformat(e["occurredAt"]) for e in earlier["items"]] == [
            t for t in times if t < middle
        ]


async def test_tampered_or_foreign_cursor_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        for index in range(3):
            await create_account(app, ws, http_account(f"a{index}"))
        page = (await app.client.get(audit_url(ws), headers=app.admin(), params={"limit": 1})).json()
        cursor = page["page"]["nextCursor"]
        payload, _, tag = cursor.partition(".")
        flipped = payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + tag
        tampered = await app.client.get(
            audit_url(ws), headers=app.admin(), params={"limit": 1, "cursor": flipped}
        )
        assert tampered.status_code == 400
        assert tampered.json()["code"] == "CURSOR_INVALID"
        other_filter = await app.client.get(
            audit_url(ws),
            headers=app.admin(),
            params={"limit": 1, "cursor": cursor, "action": "account.create"},
        )
        assert other_filter.json()["code"] == "CURSOR_INVALID"
        other_resource = await app.client.get(
            accounts_url(ws), headers=app.admin(), params={"cursor": cursor}
        )
        assert other_resource.json()["code"] == "CURSOR_INVALID"
        bad_time = await app.client.get(
            audit_url(ws), headers=app.admin(), params={"occurredAfter": "yesterday"}
        )
        assert bad_time.status_code == 400


async def test_only_admins_read_the_audit_log_and_denials_are_recorded(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        viewer_id, viewer = await issue_token(app, ws, "VIEWER")
        _, operator = await issue_token(app, ws, "OPERATOR")
        assert (await app.client.get(audit_url(ws), headers=viewer)).status_code == 403
        assert (await app.client.get(audit_url(ws), headers=operator)).status_code == 403
        assert (
            await app.client.post(accounts_url(ws), headers=viewer, json=http_account())
        ).status_code == 403
        _, admin = await issue_token(app, ws, "ADMIN")
        denied = await app.client.get(audit_url(ws), headers=admin, params={"actorId": viewer_id})
        assert [(e["action"], e["outcome"]) for e in denied.json()["items"]] == [
            ("account.create", "DENIED"),
            ("audit.read", "DENIED"),
        ]
        tokens = await app.client.get(audit_url(ws), headers=admin, params={"action": "token.create"})
        # The three issued here, and the bootstrap token the Service itself created at first start.
        assert [e["actor"]["type"] for e in tokens.json()["items"]] == ["USER", "USER", "USER", "SYSTEM"]
        assert all(e["details"]["fieldNames"] == ["name", "role"] for e in tokens.json()["items"])


async def test_events_outside_any_workspace_are_read_by_a_system_admin_only(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, admin = await issue_token(app, ws, "ADMIN")
        refused = await app.client.post(f"{API}/workspaces", headers=admin, json={"name": "not mine"})
        assert refused.status_code == 403

        system = f"{API}/audit-events"
        page = await app.client.get(system, headers=app.admin(), params={"action": "workspace.create"})
        assert page.status_code == 200, page.text
        [event] = page.json()["items"]
        assert (event["outcome"], event["workspaceId"]) == ("DENIED", None)
        # Nothing recorded in a workspace is listed here.
        everything = (await app.client.get(system, headers=app.admin(), params={"limit": 100})).json()
        assert {e["workspaceId"] for e in everything["items"]} == {None}
        assert {e["action"] for e in everything["items"]} >= {"workspace.create", "audit.read"}

        workspace_admin = await app.client.get(system, headers=admin)
        assert (workspace_admin.status_code, workspace_admin.json()["code"]) == (403, "ACCESS_DENIED")
        reads = await app.client.get(system, headers=app.admin(), params={"action": "audit.read"})
        assert [e["outcome"] for e in reads.json()["items"]][:2] == ["SUCCESS", "DENIED"]


async def test_a_token_without_a_role_in_a_workspace_is_404_there_and_audited_there(tmp_path: Path) -> None:
    """Permission failures are audited (seed). A token with no role in a workspace is told nothing
    (404, as for a workspace that does not exist), and the workspace's ADMINs see the attempt."""
    async with service(tmp_path) as app:
        team_a = await create_workspace(app, "team-a")
        team_b = await create_workspace(app, "team-b")
        outsider_id, outsider = await issue_token(app, team_b, "ADMIN", name="b-admin")
        listing = await app.client.get(f"{API}/workspaces/{team_a}/accounts", headers=outsider)
        minting = await app.client.post(
            f"{API}/workspaces/{team_a}/api-tokens", headers=outsider, json={"name": "x", "role": "ADMIN"}
        )
        nowhere = await app.client.get(
            f"{API}/workspaces/01900000-0000-7000-8000-000000000000/accounts", headers=outsider
        )
        events = (
            await app.client.get(
                f"{API}/workspaces/{team_a}/audit-events",
                headers=app.admin(),
                params={"actorId": outsider_id},
            )
        ).json()["items"]

    assert [r.status_code for r in (listing, minting, nowhere)] == [404, 404, 404]
    # The same answer as for a workspace that does not exist.
    assert {r.json()["code"] for r in (listing, minting, nowhere)} == {"RESOURCE_NOT_FOUND"}
    assert [(e["action"], e["outcome"]) for e in events] == [
        ("token.create", "DENIED"),
        ("account.list", "DENIED"),
    ]


async def test_every_audited_refusal_carries_the_trace_id_of_its_request(tmp_path: Path) -> None:
    """A DENIED event points at the request's log lines, whichever use case refused it: the run reads
    used to record theirs without one."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        team = await create_workspace(app, "team-b")
        _, outsider = await issue_token(app, team, "ADMIN")
        _, viewer = await issue_token(app, ws, "VIEWER")
        attempts = {
            "trace-runs-list": ("GET", f"{API}/workspaces/{ws}/runs", outsider, 404),
            "trace-run-read": ("GET", f"{API}/workspaces/{ws}/runs/{'0' * 26}", outsider, 404),
            "trace-accounts": ("GET", accounts_url(ws), outsider, 404),
            "trace-confirm": ("POST", f"{API}/workspaces/{ws}/jobs/{'0' * 26}/run-confirmation", viewer, 403),
        }
        for trace, (method, url, headers, status) in attempts.items():
            response = await app.client.request(
                method, url, headers={**headers, "X-Trace-Id": trace}, json={}
            )
            assert response.status_code == status, (trace, response.text)
        listed = await app.client.get(audit_url(ws), headers=app.admin(), params={"limit": 100})

    denied = [e for e in listed.json()["items"] if e["outcome"] == "DENIED"]
    assert {e["traceId"] for e in denied} == set(attempts)


async def test_a_refused_attempt_names_its_target_under_the_targets_own_type(tmp_path: Path) -> None:
    """So that ``?resourceType=…&resourceId=…`` finds the attempts on a job, an audience or a snapshot:
    an attempt that would have made something new names what it was made from."""
    async with runs_service(tmp_path) as app:
        world = await seed_world(app)
        ws = world.workspace_id
        _, viewer = await issue_token(app, ws, "VIEWER")
        audience = f"{API}/workspaces/{ws}/audiences/{world.audience.id}"
        attempts = [
            await app.client.post(world.job_url("run-confirmation"), headers=viewer),
            await app.client.post(
                world.job_url("runs"),
                headers={**viewer, "Idempotency-Key": "viewer-1"},
                json={"confirmationToken": "x"},
            ),
            await app.client.post(
                f"{audience}/imports", headers=viewer, json={"format": "TXT", "fieldMapping": {"1": "mobile"}}
            ),
        ]
        _, outsider = await issue_token(app, await create_workspace(app, "elsewhere"), "ADMIN")
        foreign = [
            await app.client.get(
                f"{API}/workspaces/{ws}/audience-snapshots/{world.snapshot.id}", headers=outsider
            ),
            await app.client.get(f"{audience}/imports", headers=outsider),
        ]
        denied = (
            await app.client.get(
                f"{API}/workspaces/{ws}/audit-events", headers=app.admin(), params={"limit": 100}
            )
        ).json()["items"]

    assert [a.status_code for a in attempts] == [403, 403, 403]
    assert [a.status_code for a in foreign] == [404, 404]
    targets = {(e["action"], e["resourceType"], e["resourceId"]) for e in denied if e["outcome"] == "DENIED"}
    assert {
        ("run.confirm", "JOB", world.job.id),
        ("run.start", "JOB", world.job.id),
        ("audience_import.create", "AUDIENCE", world.audience.id),
        ("audience_snapshot.read", "AUDIENCE_SNAPSHOT", world.snapshot.id),
        ("audience_import.list", "AUDIENCE", world.audience.id),
    } <= targets


async def test_the_refused_attempts_are_found_by_their_outcome(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        await create_account(app, ws, http_account("allowed"))
        refused = await app.client.post(accounts_url(ws), headers=viewer, json=http_account("refused"))
        await app.client.post(accounts_url(ws), headers=viewer, json=http_account("refused again"))
        denied = (
            await app.client.get(
                audit_url(ws), headers=app.admin(), params={"outcome": "DENIED", "limit": 100}
            )
        ).json()
        succeeded = (
            await app.client.get(
                audit_url(ws), headers=app.admin(), params={"outcome": "SUCCESS", "action": "account.create"}
            )
        ).json()
        unknown = await app.client.get(audit_url(ws), headers=app.admin(), params={"outcome": "MAYBE"})
        first = (
            await app.client.get(audit_url(ws), headers=app.admin(), params={"outcome": "DENIED", "limit": 1})
        ).json()
        crossed = await app.client.get(
            audit_url(ws),
            headers=app.admin(),
            params={"outcome": "SUCCESS", "cursor": first["page"]["nextCursor"]},
        )

    assert refused.status_code == 403
    assert denied["items"]
    assert {e["outcome"] for e in denied["items"]} == {"DENIED"}
    assert "account.create" in {e["action"] for e in denied["items"]}
    assert [e["outcome"] for e in succeeded["items"]] == ["SUCCESS"]
    assert unknown.status_code == 400
    assert unknown.json()["errors"][0]["field"] == "outcome"
    # A cursor is bound to its filters, the outcome included.
    assert crossed.status_code == 400
    assert crossed.json()["code"] == "CURSOR_INVALID"
