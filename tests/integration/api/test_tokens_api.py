"""API tokens: shown once, listed as metadata, revoked for good, and confined to their workspace."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    accounts_url,
    bearer,
    create_workspace,
    default_workspace,
    http_account,
    issue_token,
    service,
    uow,
)
from wepush.server.domain import utc_now


def tokens_url(workspace_id: str, *rest: str) -> str:
    return "/".join([f"{API}/workspaces/{workspace_id}/api-tokens", *rest])


async def expire(app: RunningApp, token_id: str) -> None:
    """Let a token's expiry pass (the API refuses an expiry in the past, so the test writes it)."""
    async with uow(app)() as tx:
        token = await tx.api_tokens.get(token_id)
        await tx.api_tokens.update(replace(token, expires_at=utc_now() - timedelta(minutes=1)))


def refused_as_last_admin(response: httpx.Response) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["code"] == "RESOURCE_IN_USE"


async def test_created_token_is_shown_once_and_works(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            tokens_url(ws),
            headers=app.admin(),
            json={"name": "ci", "role": "OPERATOR", "expiresAt": "2099-01-01T00:00:00Z"},
        )
        assert response.status_code == 201
        created = response.json()
        plaintext = created["token"]
        assert plaintext.startswith("wpn_")
        assert created["tokenPrefix"] == plaintext[:8]
        assert (created["role"], created["expiresAt"], created["revokedAt"]) == (
            "OPERATOR",
            "2099-01-01T00:00:00Z",
            None,
        )
        assert response.headers["location"] == f"{tokens_url(ws)}/{created['id']}"

        usable = await app.client.get(f"{API}/workspaces/{ws}/accounts", headers=bearer(plaintext))
        assert usable.status_code == 200

        listed = await app.client.get(tokens_url(ws), headers=app.admin())
        assert listed.status_code == 200
        assert plaintext not in listed.text
        [item] = [t for t in listed.json()["items"] if t["id"] == created["id"]]
        assert "token" not in item
        assert item["lastUsedAt"] is not None  # it was just used


async def test_revoked_token_is_refused_and_revocation_is_idempotent(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        token_id, headers = await issue_token(app, ws, "VIEWER")
        assert (await app.client.get(f"{API}/workspaces/{ws}", headers=headers)).status_code == 200
        first = await app.client.delete(tokens_url(ws, token_id), headers=app.admin())
        again = await app.client.delete(tokens_url(ws, token_id), headers=app.admin())
        assert (first.status_code, again.status_code) == (204, 204)
        refused = await app.client.get(f"{API}/workspaces/{ws}", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["code"] == "AUTHENTICATION_REQUIRED"
        listed = await app.client.get(tokens_url(ws), headers=app.admin())
        [item] = [t for t in listed.json()["items"] if t["id"] == token_id]
        assert item["revokedAt"] is not None
        audit = await app.client.get(
            f"{API}/workspaces/{ws}/audit-events", headers=app.admin(), params={"action": "token.revoke"}
        )
        assert [e["resourceId"] for e in audit.json()["items"]] == [token_id]  # the no-op left no record


async def test_expiry_in_the_past_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            tokens_url(ws),
            headers=app.admin(),
            json={"name": "old", "role": "VIEWER", "expiresAt": "2001-01-01T00:00:00Z"},
        )
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "/expiresAt"


async def test_workspace_admin_manages_only_its_own_workspace_tokens(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        default = await default_workspace(app)
        other = await create_workspace(app, "team-b")
        default_token, _ = await issue_token(app, default, "VIEWER")
        _, admin_b = await issue_token(app, other, "ADMIN")

        for response in (
            await app.client.get(tokens_url(default), headers=admin_b),
            await app.client.post(tokens_url(default), headers=admin_b, json={"name": "x", "role": "ADMIN"}),
            await app.client.delete(tokens_url(default, default_token), headers=admin_b),
            # The token id under the admin's own workspace is not theirs either.
            await app.client.delete(tokens_url(other, default_token), headers=admin_b),
        ):
            assert response.status_code == 404

        # A workspace ADMIN of the default workspace does not see or revoke the SYSTEM_ADMIN token.
        _, admin_default = await issue_token(app, default, "ADMIN")
        listed = await app.client.get(tokens_url(default), headers=admin_default)
        names = {t["name"] for t in listed.json()["items"]}
        assert "bootstrap-admin" not in names
        assert {"viewer-token", "admin-token"} <= names
        system = await app.client.get(tokens_url(default), headers=app.admin())
        [bootstrap] = [t for t in system.json()["items"] if t["name"] == "bootstrap-admin"]
        refused = await app.client.delete(tokens_url(default, bootstrap["id"]), headers=admin_default)
        assert refused.status_code == 404
        assert (await app.client.get(f"{API}/workspaces", headers=app.admin())).status_code == 200


async def test_the_list_shows_the_role_a_token_acts_with_and_who_is_system_admin(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        token_id, admin = await issue_token(app, ws, "ADMIN", name="was-admin")
        await issue_token(app, ws, "ADMIN", name="stays-admin")  # the bootstrap token is no keeper
        demoted = await app.client.put(
            f"{API}/workspaces/{ws}/members/{token_id}", headers=app.admin(), json={"role": "VIEWER"}
        )
        assert demoted.status_code == 200
        # The demotion is obeyed: the token can no longer manage tokens ...
        assert (await app.client.get(tokens_url(ws), headers=admin)).status_code == 403

        listed = await app.client.get(tokens_url(ws), headers=app.admin())
        by_name = {t["name"]: t for t in listed.json()["items"]}
        # ... and the list says so, instead of the role it was issued with.
        was_admin = by_name["was-admin"]
        assert (was_admin["role"], was_admin["issuedRole"], was_admin["systemAdmin"]) == (
            "VIEWER",
            "ADMIN",
            False,
        )
        bootstrap = by_name["bootstrap-admin"]
        assert (bootstrap["role"], bootstrap["issuedRole"], bootstrap["systemAdmin"]) == (
            "ADMIN",
            "ADMIN",
            True,
        )

        created = await app.client.post(
            tokens_url(ws), headers=app.admin(), json={"name": "new", "role": "OPERATOR"}
        )
        body = created.json()
        assert (body["role"], body["issuedRole"], body["systemAdmin"]) == ("OPERATOR", "OPERATOR", False)


async def test_an_idempotency_key_is_refused_rather_than_ignored(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        refused = await app.client.post(
            tokens_url(ws),
            headers={**app.admin(), "Idempotency-Key": "ci-token-1"},
            json={"name": "ci", "role": "OPERATOR"},
        )

        assert refused.status_code == 400
        assert [(e["field"], e["code"]) for e in refused.json()["errors"]] == [
            ("Idempotency-Key", "NOT_ACCEPTED")
        ]
        listed = await app.client.get(tokens_url(ws), headers=app.admin())
        assert "ci" not in {t["name"] for t in listed.json()["items"]}


async def test_operator_cannot_manage_tokens(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, operator = await issue_token(app, ws, "OPERATOR")
        listed = await app.client.get(tokens_url(ws), headers=operator)
        created = await app.client.post(tokens_url(ws), headers=operator, json={"name": "x", "role": "ADMIN"})
        assert (listed.status_code, created.status_code) == (403, 403)


async def test_token_pages_follow_the_cursor(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        issued = {(await issue_token(app, ws, "VIEWER", name=f"t{i}"))[0] for i in range(5)}
        _, admin = await issue_token(app, ws, "ADMIN", name="pager")
        seen: list[str] = []
        params: dict[str, str | int] = {"limit": 2}
        while True:
            page = (await app.client.get(tokens_url(ws), headers=admin, params=params)).json()
            seen.extend(t["id"] for t in page["items"])
            if not page["page"]["hasMore"]:
                break
            params["cursor"] = page["page"]["nextCursor"]
        assert len(seen) == len(set(seen)) == 6  # five viewers and the pager, never the system token
        assert issued < set(seen)


async def test_a_revoked_token_presented_again_is_audited_once_a_minute(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        token_id, headers = await issue_token(app, ws, "VIEWER")
        assert (await app.client.delete(tokens_url(ws, token_id), headers=app.admin())).status_code == 204
        for _ in range(3):
            assert (await app.client.get(f"{API}/workspaces/{ws}", headers=headers)).status_code == 401
        audit = await app.client.get(
            f"{API}/workspaces/{ws}/audit-events", headers=app.admin(), params={"action": "token.rejected"}
        )
        [event] = audit.json()["items"]
        assert (event["resourceId"], event["outcome"]) == (token_id, "DENIED")
        assert "after it was revoked" in event["details"]["summary"]
        assert headers["Authorization"].removeprefix("Bearer ") not in audit.text


async def test_unknown_tokens_are_reported_in_a_log_line_without_their_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wepush.server.application.authentication")
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        for guess in ("wpn_" + "x" * 40, "not-even-a-token"):
            refused = await app.client.get(f"{API}/workspaces/{ws}", headers=bearer(guess))
            assert refused.status_code == 401
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "AUTHENTICATION_FAILED"]
    assert "1 API token(s) rejected" in line.getMessage()  # the second falls in the same minute
    assert "x" * 40 not in caplog.text
    assert "not-even-a-token" not in caplog.text


async def test_white_space_after_the_token_is_no_part_of_it(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        valid = app.admin()["Authorization"]
        answers = [
            (await app.client.get(f"{API}/workspaces/{ws}", headers={"Authorization": value})).status_code
            for value in (valid + " ", valid + "\t", valid + " \t ", valid + " x")
        ]

    assert answers == [200, 200, 200, 401]


async def test_a_request_with_two_authorization_headers_is_refused_in_either_order(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        valid = app.admin()["Authorization"]
        answers = [
            await app.client.get(
                f"{API}/workspaces/{ws}", headers=[("Authorization", a), ("Authorization", b)]
            )
            for a, b in ((valid, "Bearer wpn_bogus"), ("Bearer wpn_bogus", valid), (valid, valid))
        ]
        alone = await app.client.get(f"{API}/workspaces/{ws}", headers=[("Authorization", valid)])

    # The first one used to win: a proxy in front that judged the other copy would disagree.
    assert [a.status_code for a in answers] == [401, 401, 401]
    assert {a.json()["code"] for a in answers} == {"AUTHENTICATION_REQUIRED"}
    assert alone.status_code == 200


async def test_the_last_working_admin_is_not_revoked_by_itself_or_by_a_system_admin(tmp_path: Path) -> None:
    """Revoking used to skip the guard a demotion has, so the last ADMIN could leave the workspace to
    nobody. A SYSTEM_ADMIN is refused too, as it is a demotion: it can make another ADMIN first."""
    async with service(tmp_path) as app:
        ws = await create_workspace(app, "team-a")
        first_id, first = await issue_token(app, ws, "ADMIN", name="first")
        by_itself = await app.client.delete(tokens_url(ws, first_id), headers=first)
        by_system_admin = await app.client.delete(tokens_url(ws, first_id), headers=app.admin())
        still_works = await app.client.get(tokens_url(ws), headers=first)

        second_id, _ = await issue_token(app, ws, "ADMIN", name="second", as_headers=first)
        await expire(app, second_id)
        beside_an_expired_one = await app.client.delete(tokens_url(ws, first_id), headers=first)
        expired_one = await app.client.delete(tokens_url(ws, second_id), headers=first)

        await issue_token(app, ws, "ADMIN", name="third", as_headers=first)
        with_a_working_one = await app.client.delete(tokens_url(ws, first_id), headers=first)

    for refused in (by_itself, by_system_admin, beside_an_expired_one):
        refused_as_last_admin(refused)
    assert ws not in by_itself.text
    assert still_works.status_code == 200
    assert expired_one.status_code == 204  # an expired token is no working ADMIN: nothing is lost
    assert with_a_working_one.status_code == 204


async def test_a_token_its_workspace_revokes_goes_even_when_it_is_the_last_admin_of_another_workspace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A leaked token is revoked by its own workspace, whatever another workspace made of it."""
    async with service(tmp_path) as app:
        home = await create_workspace(app, "home")
        team = await create_workspace(app, "team")
        home_admin_id, home_admin = await issue_token(app, home, "ADMIN", name="home-admin")
        guest_id, guest = await issue_token(app, home, "VIEWER", name="guest")
        granted = await app.client.put(
            f"{API}/workspaces/{team}/members/{guest_id}", headers=app.admin(), json={"role": "ADMIN"}
        )
        caplog.set_level(logging.WARNING, logger="wepush.server.tokens")
        revoked = await app.client.delete(tokens_url(home, guest_id), headers=home_admin)
        reads_home = await app.client.get(f"{API}/workspaces/{home}/accounts", headers=guest)
        reads_team = await app.client.get(f"{API}/workspaces/{team}/accounts", headers=guest)
        team_audit = await app.client.get(
            f"{API}/workspaces/{team}/audit-events",
            headers=app.admin(),
            params={"action": "workspace.admin.lost"},
        )

    assert granted.status_code == 200
    assert revoked.status_code == 204, revoked.text
    assert (reads_home.status_code, reads_team.status_code) == (401, 401)
    [lost] = team_audit.json()["items"]
    assert (lost["resourceType"], lost["resourceId"], lost["actor"]["id"]) == (
        "WORKSPACE",
        team,
        home_admin_id,
    )
    assert any(
        r.__dict__.get("event") == "WORKSPACE_ADMIN_LOST" and team in r.getMessage() for r in caplog.records
    )


async def test_the_last_admin_of_its_own_workspace_is_not_revoked_even_when_another_workspace_has_admins(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        home = await create_workspace(app, "home")
        team = await create_workspace(app, "team")
        keeper_id, _ = await issue_token(app, home, "ADMIN", name="keeper")
        await app.client.put(
            f"{API}/workspaces/{team}/members/{keeper_id}", headers=app.admin(), json={"role": "ADMIN"}
        )
        await issue_token(app, team, "ADMIN", name="team-admin")
        refused = await app.client.delete(tokens_url(home, keeper_id), headers=app.admin())

    refused_as_last_admin(refused)


async def test_the_only_ordinary_admin_of_the_default_workspace_is_not_revoked(tmp_path: Path) -> None:
    """The bootstrap SYSTEM_ADMIN token is ADMIN of the default workspace but no keeper of it."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        admin_id, admin = await issue_token(app, ws, "ADMIN")
        refused = await app.client.delete(tokens_url(ws, admin_id), headers=admin)
    refused_as_last_admin(refused)


async def test_a_token_name_is_refused_while_a_usable_token_of_the_workspace_has_it(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        other = await create_workspace(app, "team-b")
        body = {"name": "a-VIEWER", "role": "VIEWER"}
        first = await app.client.post(tokens_url(ws), headers=app.admin(), json=body)
        duplicate = await app.client.post(tokens_url(ws), headers=app.admin(), json={**body, "role": "ADMIN"})
        elsewhere = await app.client.post(tokens_url(other), headers=app.admin(), json=body)
        await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("a-VIEWER"))
        account = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("a-VIEWER"))

        await app.client.delete(tokens_url(ws, first.json()["id"]), headers=app.admin())
        after_revocation = await app.client.post(tokens_url(ws), headers=app.admin(), json=body)
        await expire(app, after_revocation.json()["id"])
        after_expiry = await app.client.post(tokens_url(ws), headers=app.admin(), json=body)
        # The SYSTEM_ADMIN token's name is not taken: a workspace ADMIN, who cannot see it, learns nothing.
        hidden = await app.client.post(
            tokens_url(ws), headers=app.admin(), json={"name": "bootstrap-admin", "role": "VIEWER"}
        )
        listed = await app.client.get(tokens_url(ws), headers=app.admin())

    assert (first.status_code, elsewhere.status_code) == (201, 201)
    # The same answer as any named resource's duplicate, without repeating the name.
    assert (duplicate.status_code, duplicate.json()["code"]) == (account.status_code, account.json()["code"])
    assert [(e["field"], e["code"]) for e in duplicate.json()["errors"]] == [
        (e["field"], e["code"]) for e in account.json()["errors"]
    ]
    assert (duplicate.status_code, duplicate.json()["errors"][0]["code"]) == (400, "NAME_ALREADY_USED")
    assert "a-VIEWER" not in duplicate.text
    assert (after_revocation.status_code, after_expiry.status_code, hidden.status_code) == (201, 201, 201)
    names = [t["name"] for t in listed.json()["items"]]
    assert names.count("a-VIEWER") == 3  # revoked, expired, usable: one of each
