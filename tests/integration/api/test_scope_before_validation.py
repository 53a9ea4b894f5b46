"""A request the caller's role could never make is refused for its scope even when it is also malformed,
or aimed at an operation not implemented yet: 403 below the operation's role, 404 outside the workspace,
and the refusal audited (``request.refused``). Callers within scope still get the validation problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support import (
    API,
    accounts_url,
    create_workspace,
    default_workspace,
    issue_token,
    service,
)

#: Schema-invalid: an unknown field and no provider.
_MALFORMED_ACCOUNT = {"name": "x", "config": {}, "unexpected": 1}


async def _events(app: RunningApp, url: str, action: str) -> list[dict[str, Any]]:
    response = await app.client.get(url, headers=app.admin(), params={"action": action})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_viewers_malformed_write_is_403_and_audited_and_an_operator_still_gets_the_400(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        _, operator = await issue_token(app, ws, "OPERATOR")
        refused = await app.client.post(accounts_url(ws), headers=viewer, json=_MALFORMED_ACCOUNT)
        invalid = await app.client.post(accounts_url(ws), headers=operator, json=_MALFORMED_ACCOUNT)
        token_refused = await app.client.post(
            f"{API}/workspaces/{ws}/api-tokens", headers=operator, json={"name": " x", "role": "GOD"}
        )
        events = await _events(app, f"{API}/workspaces/{ws}/audit-events", "request.refused")
    assert (refused.status_code, refused.json()["code"]) == (403, "ACCESS_DENIED")
    assert (invalid.status_code, invalid.json()["code"]) == (400, "VALIDATION_FAILED")
    assert (token_refused.status_code, token_refused.json()["code"]) == (403, "ACCESS_DENIED")
    assert [(e["outcome"], e["resourceType"]) for e in events] == [
        ("DENIED", "API_TOKEN"),
        ("DENIED", "ACCOUNT"),
    ]
    assert events[1]["details"]["summary"].startswith("createAccount: needs the OPERATOR role")
    assert events[0]["details"]["summary"].startswith("createApiToken: needs the ADMIN role")


async def test_another_workspaces_token_gets_404_for_malformed_requests_and_the_attempt_is_audited_there(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        home = await default_workspace(app)
        other = await create_workspace(app, "other")
        _, outsider = await issue_token(app, other, "ADMIN")
        write = await app.client.post(accounts_url(home), headers=outsider, json=_MALFORMED_ACCOUNT)
        read = await app.client.get(accounts_url(home), headers=outsider, params={"limit": 0})
        events = await _events(app, f"{API}/workspaces/{home}/audit-events", "request.refused")
    assert (write.status_code, write.json()["code"]) == (404, "RESOURCE_NOT_FOUND")
    assert (read.status_code, read.json()["code"]) == (404, "RESOURCE_NOT_FOUND")
    assert [e["details"]["summary"].split(":")[0] for e in events] == ["listAccounts", "createAccount"]
    assert all("no role in this workspace" in e["details"]["summary"] for e in events)


async def test_members_still_get_validation_problems_for_reads_and_admins_for_writes(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        read = await app.client.get(accounts_url(ws), headers=viewer, params={"limit": 0})
        write = await app.client.post(accounts_url(ws), headers=app.admin(), json=_MALFORMED_ACCOUNT)
        events = await _events(app, f"{API}/workspaces/{ws}/audit-events", "request.refused")
    assert (read.status_code, read.json()["code"]) == (400, "VALIDATION_FAILED")
    assert (write.status_code, write.json()["code"]) == (400, "VALIDATION_FAILED")
    assert events == []


async def test_an_operation_not_implemented_yet_checks_the_scope_before_answering_501(tmp_path: Path) -> None:
    schedule = {"jobId": "01900000-0000-7000-8000-000000000000", "cron": "0 9 * * *", "timezone": "UTC"}
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        refused = await app.client.post(f"{API}/workspaces/{ws}/schedules", headers=viewer, json=schedule)
        admin = await app.client.post(f"{API}/workspaces/{ws}/schedules", headers=app.admin(), json=schedule)
    assert (refused.status_code, refused.json()["code"]) == (403, "ACCESS_DENIED")
    assert (admin.status_code, admin.json()["code"]) == (501, "NOT_IMPLEMENTED")


async def test_a_system_operation_refuses_a_workspace_admin_before_reading_its_body(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, admin = await issue_token(app, ws, "ADMIN")
        refused = await app.client.post(f"{API}/workspaces", headers=admin, json={"name": 7})
        events = await _events(app, f"{API}/audit-events", "request.refused")
    assert (refused.status_code, refused.json()["code"]) == (403, "ACCESS_DENIED")
    assert [(e["outcome"], e["resourceType"], e["workspaceId"]) for e in events] == [
        ("DENIED", "WORKSPACE", None)
    ]
    assert events[0]["details"]["summary"].startswith("createWorkspace: needs SYSTEM_ADMIN")


async def test_operations_outside_a_workspace_that_every_token_may_call_keep_their_400(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        workspaces = await app.client.get(f"{API}/workspaces", headers=viewer, params={"limit": 0})
        providers = await app.client.get(f"{API}/providers", headers=viewer, params={"bogus": 1})
        events = await _events(app, f"{API}/audit-events", "request.refused")
    assert (workspaces.status_code, workspaces.json()["code"]) == (400, "VALIDATION_FAILED")
    assert (providers.status_code, providers.json()["code"]) == (400, "VALIDATION_FAILED")
    assert events == []
