from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.helpers_app import running_app, standalone_config

SECRET = "S3CR3T-do-not-echo-4711"


async def _workspace_id(app: object) -> str:
    client = app.client  # type: ignore[attr-defined]
    response = await client.get("/api/v1/workspaces", headers=app.admin())  # type: ignore[attr-defined]
    workspace_id: str = response.json()["items"][0]["id"]
    return workspace_id


async def test_validation_errors_name_the_field_and_never_echo_the_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_app(standalone_config(tmp_path)) as app:
        workspace_id = await _workspace_id(app)
        body = {
            "name": "webhook",
            "providerId": "wepush.http",
            "config": {
                "baseUrl": "https://hooks.example.com",
                "auth": {"type": "BEARER", "token": {"$secret": "token"}},
            },
            "secrets": {"token": {"operation": "REPLACE", "value": SECRET, "unexpected": True}},
        }
        response = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/accounts", json=body, headers=app.admin()
        )
        assert response.status_code == 400
        problem = response.json()
        assert problem["code"] == "VALIDATION_FAILED"
        assert problem["errors"][0]["field"].startswith("/secrets/token")
        assert SECRET not in response.text
        wrong_type = await app.client.post(
            f"/api/v1/workspaces/{workspace_id}/accounts", json={**body, "name": 4711}, headers=app.admin()
        )
        assert wrong_type.status_code == 400
        assert wrong_type.json()["errors"][0]["field"] == "/name"
    assert SECRET not in caplog.text


async def test_a_body_that_is_not_utf8_is_a_400_not_a_500(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces",
            content=b'{"name": "\xff\xfe"}',
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert response.status_code == 400
        assert response.json()["code"] == "VALIDATION_FAILED"


async def test_malformed_json_is_reported_by_position(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.post(
            "/api/v1/workspaces",
            content=b'{"name": "x",',
            headers={**app.admin(), "Content-Type": "application/json"},
        )
        assert response.status_code == 400
        assert "line 1" in response.json()["detail"]


async def test_problems_carry_the_trace_id_of_the_request(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.get("/api/v1/providers", headers={"X-Trace-Id": "trace-xyz-42"})
        assert response.status_code == 401
        assert response.json()["traceId"] == "trace-xyz-42"
