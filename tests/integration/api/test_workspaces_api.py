"""Workspaces and member roles through the real API."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tests.integration.api._support import (
    API,
    accounts_url,
    create_workspace,
    default_workspace,
    http_account,
    issue_token,
    service,
    uow,
)
from wepush.server.domain import utc_now


async def test_system_admin_sees_every_workspace_and_members_only_their_own(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        team_b = await create_workspace(app, "Team B")
        await create_workspace(app, "team c")
        everything = await app.client.get(f"{API}/workspaces", headers=app.admin())
        assert [w["name"] for w in everything.json()["items"]] == ["team c", "Team B", "default"]
        filtered = await app.client.get(f"{API}/workspaces", headers=app.admin(), params={"name": "TEAM"})
        assert [w["name"] for w in filtered.json()["items"]] == ["team c", "Team B"]

        _, member = await issue_token(app, team_b, "VIEWER")
        mine = await app.client.get(f"{API}/workspaces", headers=member)
        assert [w["id"] for w in mine.json()["items"]] == [team_b]
        default = await default_workspace(app)
        hidden = await app.client.get(f"{API}/workspaces/{default}", headers=member)
        assert hidden.status_code == 404


async def test_only_a_system_admin_creates_workspaces(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        default = await default_workspace(app)
        _, admin = await issue_token(app, default, "ADMIN")
        response = await app.client.post(f"{API}/workspaces", headers=admin, json={"name": "rogue"})
        assert response.status_code == 403
        assert response.json()["code"] == "ACCESS_DENIED"
        names = [
            w["name"]
            for w in (await app.client.get(f"{API}/workspaces", headers=app.admin())).json()["items"]
        ]
        assert "rogue" not in names


async def test_workspace_create_is_idempotent_and_names_are_unique(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        headers = {**app.admin(), "Idempotency-Key": "ws-create-1"}
        first = await app.client.post(f"{API}/workspaces", headers=headers, json={"name": "ops"})
        again = await app.client.post(f"{API}/workspaces", headers=headers, json={"name": "ops"})
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.json() == first.json()
        assert first.headers["location"] == f"{API}/workspaces/{first.json()['id']}"
        conflict = await app.client.post(f"{API}/workspaces", headers=headers, json={"name": "ops-2"})
        assert conflict.status_code == 409
        assert conflict.json()["code"] == "IDEMPOTENCY_CONFLICT"
        duplicate = await app.client.post(f"{API}/workspaces", headers=app.admin(), json={"name": "ops"})
        assert duplicate.status_code == 400


async def test_update_needs_admin_and_the_current_version(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "marketing")
        _, viewer = await issue_token(app, ws, "VIEWER")
        _, admin = await issue_token(app, ws, "ADMIN")
        body = {"name": "Marketing", "description": "Campaigns", "version": 1}
        denied = await app.client.put(f"{API}/workspaces/{ws}", headers=viewer, json=body)
        assert denied.status_code == 403
        updated = await app.client.put(f"{API}/workspaces/{ws}", headers=admin, json=body)
        assert updated.status_code == 200
        assert (updated.json()["name"], updated.json()["version"]) == ("Marketing", 2)
        stale = await app.client.put(f"{API}/workspaces/{ws}", headers=admin, json={**body, "name": "Other"})
        assert stale.status_code == 409
        assert stale.json()["code"] == "VERSION_CONFLICT"
        huge = await app.client.put(f"{API}/workspaces/{ws}", headers=admin, json={**body, "version": 2**63})
        # Beyond what a version column holds: refused by the contract's range, never a database overflow.
        assert huge.status_code == 400
        assert [error["field"] for error in huge.json()["errors"]] == ["/version"]
        audit = await app.client.get(
            f"{API}/workspaces/{ws}/audit-events", headers=admin, params={"action": "workspace.update"}
        )
        outcomes = [(e["outcome"], e["details"].get("fieldNames")) for e in audit.json()["items"]]
        assert outcomes == [("SUCCESS", ["description", "name"]), ("DENIED", [])]


async def test_member_roles_grant_access_and_the_last_admin_stays(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        # A workspace no token was issued in: its members are all the ADMINs it has.
        team_a = await create_workspace(app, "team-a")
        team_b = await create_workspace(app, "team-b")
        token_id, headers = await issue_token(app, team_b, "VIEWER")
        before = await app.client.post(accounts_url(team_a), headers=headers, json=http_account())
        assert before.status_code == 404  # not a member of team-a

        members = f"{API}/workspaces/{team_a}/members"
        granted = await app.client.put(
            f"{members}/{token_id}", headers=app.admin(), json={"role": "OPERATOR"}
        )
        assert granted.status_code == 200
        assert (granted.json()["userId"], granted.json()["role"]) == (token_id, "OPERATOR")
        after = await app.client.post(accounts_url(team_a), headers=headers, json=http_account())
        assert after.status_code == 201

        promoted = await app.client.put(f"{members}/{token_id}", headers=app.admin(), json={"role": "ADMIN"})
        assert promoted.json()["role"] == "ADMIN"
        listed = await app.client.get(members, headers=app.admin())
        assert [(m["userId"], m["role"]) for m in listed.json()["items"]] == [(token_id, "ADMIN")]
        demoted = await app.client.put(f"{members}/{token_id}", headers=app.admin(), json={"role": "VIEWER"})
        assert demoted.status_code == 409
        assert demoted.json()["code"] == "RESOURCE_IN_USE"

        other_id, _ = await issue_token(app, team_b, "VIEWER", name="someone-else")
        second = await app.client.put(f"{members}/{other_id}", headers=app.admin(), json={"role": "ADMIN"})
        assert second.status_code == 200
        now_allowed = await app.client.put(
            f"{members}/{token_id}", headers=app.admin(), json={"role": "VIEWER"}
        )
        assert now_allowed.json()["role"] == "VIEWER"


async def test_a_token_issued_as_admin_cannot_demote_itself_when_it_is_the_last(tmp_path: Path) -> None:
    """The guard counts what authentication grants: a token issued as ADMIN is one without a membership
    row, and a revoked ADMIN keeps nothing. Both used to let the last working ADMIN go."""
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team-c")
        members = f"{API}/workspaces/{ws}/members"
        first_id, first = await issue_token(app, ws, "ADMIN", name="first")
        alone = await app.client.put(f"{members}/{first_id}", headers=first, json={"role": "VIEWER"})

        second_id, _ = await issue_token(app, ws, "VIEWER", name="second", as_headers=first)
        granted = await app.client.put(f"{members}/{second_id}", headers=first, json={"role": "ADMIN"})
        revoked = await app.client.delete(f"{API}/workspaces/{ws}/api-tokens/{second_id}", headers=first)
        beside_a_revoked_one = await app.client.put(
            f"{members}/{first_id}", headers=first, json={"role": "VIEWER"}
        )

        await issue_token(app, ws, "ADMIN", name="third", as_headers=first)
        with_a_working_one = await app.client.put(
            f"{members}/{first_id}", headers=first, json={"role": "VIEWER"}
        )

    for refused in (alone, beside_a_revoked_one):
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "RESOURCE_IN_USE"
    assert (granted.status_code, revoked.status_code) == (200, 204)
    assert with_a_working_one.status_code == 200, with_a_working_one.text
    assert with_a_working_one.json()["role"] == "VIEWER"


async def test_removing_a_member_takes_a_foreign_tokens_access_away(tmp_path: Path) -> None:
    """A membership granted to another workspace's token could only be demoted to VIEWER, which still
    reads everything; removed, the token has no access here at all."""
    async with service(tmp_path) as app:
        team_a = await create_workspace(app, "team-a")
        team_b = await create_workspace(app, "team-b")
        admin_id, admin = await issue_token(app, team_a, "ADMIN", name="a-admin")
        guest_id, guest = await issue_token(app, team_b, "ADMIN", name="b-admin")
        members = f"{API}/workspaces/{team_a}/members"
        granted = await app.client.put(f"{members}/{guest_id}", headers=admin, json={"role": "OPERATOR"})
        reading = await app.client.get(accounts_url(team_a), headers=guest)
        viewer = await app.client.delete(f"{members}/{guest_id}", headers=guest)  # an OPERATOR here
        removed = await app.client.delete(f"{members}/{guest_id}", headers=admin)
        after = await app.client.get(accounts_url(team_a), headers=guest)
        again = await app.client.delete(f"{members}/{guest_id}", headers=admin)
        listed = (await app.client.get(members, headers=admin)).json()["items"]
        audit = await app.client.get(
            f"{API}/workspaces/{team_a}/audit-events",
            headers=admin,
            params={"action": "workspace.member.delete", "resourceId": guest_id},
        )

    assert (granted.status_code, reading.status_code) == (200, 200)
    assert viewer.status_code == 403
    assert removed.status_code == 204
    assert after.status_code == 404  # another workspace's token: not even told the workspace exists
    assert (again.status_code, again.json()["code"]) == (404, "RESOURCE_NOT_FOUND")
    assert listed == []
    assert [(e["outcome"], e["actor"]["id"]) for e in audit.json()["items"]] == [
        ("SUCCESS", admin_id),
        ("DENIED", guest_id),
    ]


async def test_removing_the_last_admin_membership_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        team_a = await create_workspace(app, "team-a")
        team_b = await create_workspace(app, "team-b")
        guest_id, guest = await issue_token(app, team_b, "VIEWER", name="b-viewer")
        members = f"{API}/workspaces/{team_a}/members"
        await app.client.put(f"{members}/{guest_id}", headers=app.admin(), json={"role": "ADMIN"})
        refused = await app.client.delete(f"{members}/{guest_id}", headers=guest)
        local_id, _ = await issue_token(app, team_a, "ADMIN", name="a-admin", as_headers=guest)
        allowed = await app.client.delete(f"{members}/{guest_id}", headers=guest)
    assert (refused.status_code, refused.json()["code"]) == (409, "RESOURCE_IN_USE")
    assert local_id
    assert allowed.status_code == 204


async def test_members_are_managed_by_workspace_admins_only(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team-b")
        _, operator = await issue_token(app, ws, "OPERATOR")
        members = f"{API}/workspaces/{ws}/members"
        assert (await app.client.get(members, headers=operator)).status_code == 403
        viewer_id, _ = await issue_token(app, ws, "VIEWER")
        put = await app.client.put(f"{members}/{viewer_id}", headers=operator, json={"role": "ADMIN"})
        assert put.status_code == 403
        _, admin = await issue_token(app, ws, "ADMIN")
        assert (
            await app.client.put(f"{members}/{viewer_id}", headers=admin, json={"role": "OPERATOR"})
        ).status_code == 200


async def test_a_member_is_an_existing_token_so_a_mistyped_id_is_not_found(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team-b")
        members = f"{API}/workspaces/{ws}/members"
        for unknown in ("00000000-0000-0000-0000-000000000000", "bootstrap-admin", "u-1"):
            put = await app.client.put(f"{members}/{unknown}", headers=app.admin(), json={"role": "OPERATOR"})
            assert (put.status_code, put.json()["code"]) == (404, "RESOURCE_NOT_FOUND"), unknown
        listed = await app.client.get(members, headers=app.admin())
        assert listed.json()["items"] == []


async def test_a_member_role_set_in_the_tokens_own_workspace_replaces_the_role_it_was_issued_with(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team-b")
        token_id, headers = await issue_token(app, ws, "OPERATOR")
        members = f"{API}/workspaces/{ws}/members"
        assert (
            await app.client.post(accounts_url(ws), headers=headers, json=http_account())
        ).status_code == 201

        demoted = await app.client.put(f"{members}/{token_id}", headers=app.admin(), json={"role": "VIEWER"})
        assert demoted.json()["role"] == "VIEWER"
        refused = await app.client.post(accounts_url(ws), headers=headers, json=http_account("second"))
        assert (refused.status_code, refused.json()["code"]) == (403, "ACCESS_DENIED")
        assert (await app.client.get(accounts_url(ws), headers=headers)).status_code == 200

        promoted = await app.client.put(f"{members}/{token_id}", headers=app.admin(), json={"role": "ADMIN"})
        assert promoted.json()["role"] == "ADMIN"
        assert (await app.client.get(members, headers=headers)).status_code == 200


async def test_the_only_ordinary_admin_of_the_default_workspace_cannot_demote_itself(tmp_path: Path) -> None:
    """The bootstrap SYSTEM_ADMIN token (ADMIN of the default workspace, unseen by its ADMINs, its file
    meant to be deleted) used to count as the remaining ADMIN, so the only real one could lock itself out."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        admin_id, admin = await issue_token(app, ws, "ADMIN", name="only-admin")
        members = f"{API}/workspaces/{ws}/members"
        by_itself = await app.client.put(f"{members}/{admin_id}", headers=admin, json={"role": "VIEWER"})
        # The same with the role held by a membership, and with the bootstrap token asking.
        member = await app.client.put(f"{members}/{admin_id}", headers=admin, json={"role": "ADMIN"})
        by_system_admin = await app.client.put(
            f"{members}/{admin_id}", headers=app.admin(), json={"role": "OPERATOR"}
        )

    assert member.status_code == 200
    for refused in (by_itself, by_system_admin):
        assert (refused.status_code, refused.json()["code"]) == (409, "RESOURCE_IN_USE")
    assert ws not in by_itself.text


async def test_a_member_that_is_no_working_admin_is_removed_even_when_none_is_left(tmp_path: Path) -> None:
    """An expired ADMIN keeps nobody in charge, so taking its membership away loses nothing."""
    async with service(tmp_path) as app:
        team_a = await create_workspace(app, "team-a")
        team_b = await create_workspace(app, "team-b")
        guest_id, _ = await issue_token(app, team_b, "VIEWER", name="b-viewer")
        members = f"{API}/workspaces/{team_a}/members"
        await app.client.put(f"{members}/{guest_id}", headers=app.admin(), json={"role": "ADMIN"})
        async with uow(app)() as tx:
            token = await tx.api_tokens.get(guest_id)
            await tx.api_tokens.update(replace(token, expires_at=utc_now() - timedelta(minutes=1)))
        removed = await app.client.delete(f"{members}/{guest_id}", headers=app.admin())
    assert removed.status_code == 204, removed.text
