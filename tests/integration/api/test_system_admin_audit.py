"""Seed: SYSTEM_ADMIN may cross workspaces, but every such operation names its target workspace and is
audited — reads as well as writes. Acting where it holds a role of its own is ordinary access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    accounts_url,
    create_account,
    create_workspace,
    default_workspace,
    http_account,
    issue_token,
    service,
    uow,
)
from tests.integration.api._support_content import (
    create_audience,
    expect,
    import_url,
    start_import,
    upload,
    ws_url,
)
from wepush.server.application._accounts_access import SYSTEM_ADMIN_ACCESS, SYSTEM_ADMIN_ACCESS_ACTION
from wepush.server.domain import AuditEvent, PageRequest


async def _events(app: RunningApp, ws: str) -> list[AuditEvent]:
    async with uow(app)(read_only=True) as tx:
        return (await tx.audit.list_page(ws, PageRequest(limit=200))).items


def _access(events: list[AuditEvent]) -> list[AuditEvent]:
    return [e for e in events if e.action == SYSTEM_ADMIN_ACCESS_ACTION]


def _granted_for(summary: object) -> str:
    """The operation an access event was granted for, from its summary."""
    assert isinstance(summary, str)
    assert summary.startswith(f"{SYSTEM_ADMIN_ACCESS}; granted for "), summary
    return summary.rsplit(" ", 1)[-1]


async def _api_events(
    app: RunningApp, ws: str, headers: dict[str, str], **params: Any
) -> list[dict[str, Any]]:
    page = expect(
        await app.client.get(ws_url(ws, "audit-events"), headers=headers, params={"limit": 100, **params}),
        200,
    )
    items: list[dict[str, Any]] = page["items"]
    return items


async def test_system_admin_reads_in_a_foreign_workspace_are_each_audited(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        team = await create_workspace(app, "team-b")
        account = await create_account(app, team, http_account())
        audience = await create_audience(app, team)
        started = await start_import(app, team, audience["id"], itemIdField="mobile")
        staged = expect(
            await upload(app, team, audience["id"], started["id"], b"mobile,name\n1380001,Ann\n,nobody\n"),
            200,
        )
        _, team_admin = await issue_token(app, team, "ADMIN")
        before = {e.id for e in await _events(app, team)}

        reads = {
            "workspace.read": f"{API}/workspaces/{team}",
            "account.list": accounts_url(team),
            "account.read": accounts_url(team, account["id"]),
            "audience.list": ws_url(team, "audiences"),
            "run.list": ws_url(team, "runs"),
            "token.list": ws_url(team, "api-tokens"),
            "audit.read": ws_url(team, "audit-events"),
            "audience_import.errors.download": import_url(team, audience["id"], staged["id"], "errors"),
        }
        for url in reads.values():
            assert (await app.client.get(url, headers=app.admin())).status_code == 200

        recorded = [e for e in await _events(app, team) if e.id not in before]
        access = _access(recorded)
        assert sorted(_granted_for(e.details["summary"]) for e in access) == sorted(reads)
        assert all(e.workspace_id == team for e in access)
        assert all(e.outcome.value == "SUCCESS" and e.details["systemAdmin"] is True for e in access)
        assert all((e.actor_type, e.actor_id) == ("USER", "bootstrap-admin") for e in access)
        by_action = {_granted_for(e.details["summary"]): e for e in access}
        assert by_action["account.read"].resource_id == account["id"]
        assert by_action["workspace.read"].resource_id == team

        # The workspace's own ADMIN sees the trail through the audit API.
        seen = await _api_events(app, team, team_admin, actorId="bootstrap-admin")
        crossed = {
            _granted_for(e["details"]["summary"]) for e in seen if e["action"] == SYSTEM_ADMIN_ACCESS_ACTION
        }
        assert set(reads) <= crossed


async def test_system_admin_writes_in_a_foreign_workspace_record_the_access_too(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        team = await create_workspace(app, "team-b")
        token_id, _ = await issue_token(app, team, "VIEWER")
        events = await _events(app, team)
        access = _access(events)
        assert [(_granted_for(e.details["summary"]), e.resource_type, e.outcome.value) for e in access] == [
            ("token.create", "API_TOKEN", "SUCCESS")
        ]
        change = [e for e in events if e.action == "token.create"]
        assert [(e.resource_id, e.outcome.value) for e in change] == [(token_id, "SUCCESS")]

        # A write refused after authorization still leaves the access in the log, and nothing that
        # reads as an account created: the access event is the only one, under its own action.
        refused = await app.client.post(
            accounts_url(team), headers=app.admin(), json=http_account(name="x", base_url="not a url")
        )
        assert refused.status_code == 400
        after = await _events(app, team)
        assert "account.create" in {_granted_for(e.details["summary"]) for e in _access(after)}
        assert [e for e in after if e.action == "account.create"] == []


async def test_access_through_a_role_of_its_own_is_not_marked_as_system_admin_access(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        default = await default_workspace(app)  # the bootstrap token holds ADMIN here
        team = await create_workspace(app, "team-b")
        _, team_admin = await issue_token(app, team, "ADMIN")
        before = len(await _events(app, default)), len(await _events(app, team))
        assert (await app.client.get(accounts_url(default), headers=app.admin())).status_code == 200
        assert (await app.client.get(ws_url(default, "audit-events"), headers=app.admin())).status_code == 200
        assert (await app.client.get(accounts_url(team), headers=team_admin)).status_code == 200
        assert (len(await _events(app, default)), len(await _events(app, team))) == before


async def test_system_admin_probing_a_missing_workspace_gets_404_and_records_nothing(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        missing = "0" * 26
        response = await app.client.get(accounts_url(missing), headers=app.admin())
        assert response.status_code == 404
        assert response.json()["code"] == "RESOURCE_NOT_FOUND"
        assert await _events(app, missing) == []


async def test_a_system_admin_listing_workspaces_it_holds_no_role_in_is_audited(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        await create_workspace(app, "team-b")
        default = await default_workspace(app)
        _, viewer = await issue_token(app, default, "VIEWER")

        everything = expect(await app.client.get(f"{API}/workspaces", headers=app.admin()), 200)
        own = expect(
            await app.client.get(f"{API}/workspaces", headers=app.admin(), params={"name": "default"}), 200
        )
        expect(await app.client.get(f"{API}/workspaces", headers=viewer), 200)
        system = expect(
            await app.client.get(
                f"{API}/audit-events", headers=app.admin(), params={"action": "workspace.list"}
            ),
            200,
        )

    assert {w["name"] for w in everything["items"]} == {"default", "team-b"}
    assert [w["name"] for w in own["items"]] == ["default"]
    # One event: the listing that showed team-b. Its own workspace, or a viewer's list, is ordinary access.
    [event] = system["items"]
    assert event["outcome"] == "SUCCESS"
    assert "listed 1 workspace(s) the caller holds no role in" in event["details"]["summary"]


async def test_a_refused_request_of_a_system_admin_still_leaves_its_trace(tmp_path: Path) -> None:
    """Malformed (400) or aimed at an operation not implemented yet (501): no use case ran, and the
    crossing into the workspace is recorded all the same, as a VIEWER's such request is."""
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team")
        malformed = await app.client.post(accounts_url(ws), headers=app.admin(), json={"name": "x"})
        too_long = await app.client.get(accounts_url(ws), headers=app.admin(), params={"limit": 1000})
        not_yet = await app.client.get(f"{API}/workspaces/{ws}/schedules", headers=app.admin())
        events = _access(await _events(app, ws))

    assert (malformed.status_code, too_long.status_code, not_yet.status_code) == (400, 400, 501)
    summaries = sorted(e.details.get("summary", "") for e in events)
    assert len(summaries) == 3
    assert all(
        s.startswith(SYSTEM_ADMIN_ACCESS) and "refused before its use case ran" in s for s in summaries
    )
    assert {s.split("granted for ")[1].split(",")[0] for s in summaries} == {
        "createAccount",
        "listAccounts",
        "listSchedules",
    }
