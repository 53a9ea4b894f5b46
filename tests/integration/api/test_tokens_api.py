"""API tokens: shown once, listed as metadata, revoked for good, and confined to their workspace."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.integration.api._support import (
    API,
    bearer,
    create_workspace,
    default_workspace,
    issue_token,
    service,
)


def tokens_url(workspace_id: str, *rest: str) -> str:
    return "/".join([f"{API}/workspaces/{workspace_id}/api-tokens", *rest])


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
