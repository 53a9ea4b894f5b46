"""Media types are case-insensitive (RFC 9110): ``APPLICATION/JSON`` is read and validated like
``application/json``. Before, Connexion found no validator for it and handed the raw bytes on — a 500,
or on an operation whose body is optional a body silently dropped. Two Content-Type headers are 400."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.api._support import API, default_workspace, service
from tests.integration.api._support_content import create_audience, expect, start_import, upload
from tests.integration.api._support_runs import seed_world
from tests.integration.api._support_runs import service as runs_service

SPELLINGS = ["APPLICATION/JSON", "Application/Json", "application/JSON; charset=utf-8"]


@pytest.mark.parametrize("media_type", SPELLINGS)
async def test_any_spelling_of_json_creates_the_resource(tmp_path: Path, media_type: str) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        created = expect(
            await app.client.post(
                f"{API}/workspaces/{ws}/audiences",
                headers={**app.admin(), "Content-Type": media_type},
                content=json.dumps({"name": "spelled", "description": "upper case"}),
            ),
            201,
        )
    assert (created["name"], created["description"]) == ("spelled", "upper case")


async def test_an_upper_case_json_body_is_validated(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        problem = expect(
            await app.client.post(
                f"{API}/workspaces/{ws}/audiences",
                headers={**app.admin(), "Content-Type": "APPLICATION/JSON"},
                content=json.dumps({"name": 5}),
            ),
            400,
        )
    assert problem["code"] == "VALIDATION_FAILED"
    assert [error["field"] for error in problem["errors"]] == ["/name"]


async def test_an_optional_body_in_upper_case_is_not_dropped(tmp_path: Path) -> None:
    """The run confirmation's body is optional: dropped, a dry run asked for became a real one."""
    async with runs_service(tmp_path) as app:
        world = await seed_world(app)
        confirmation = expect(
            await app.client.post(
                world.job_url("run-confirmation"),
                headers={**app.admin(), "Content-Type": "Application/Json"},
                content=json.dumps({"dryRun": True}),
            ),
            200,
        )
        refused = await app.client.post(
            world.job_url("run-confirmation"),
            headers={**app.admin(), "Content-Type": "APPLICATION/JSON"},
            content=json.dumps({"dryRun": True, "unknown": 1}),
        )
    assert confirmation["dryRun"] is True
    assert refused.status_code == 400
    assert refused.json()["code"] == "VALIDATION_FAILED"


async def test_an_upload_in_upper_case_is_read(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        staged = expect(
            await upload(
                app, ws, audience["id"], started["id"], b"mobile,name\n1,Ann\n", media_type="TEXT/CSV"
            ),
            200,
        )
    assert staged["counts"]["acceptedRows"] == 1


async def test_two_content_type_headers_are_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            f"{API}/workspaces/{ws}/audiences",
            headers=[
                *app.admin().items(),
                ("Content-Type", "application/json"),
                ("Content-Type", "text/plain"),
            ],
            content=json.dumps({"name": "twice"}),
        )
        listed = expect(await app.client.get(f"{API}/workspaces/{ws}/audiences", headers=app.admin()), 200)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.json()["code"] == "VALIDATION_FAILED"
    assert response.json()["title"] == "Request validation failed"  # as every other 400 says
    assert "Content-Type" in response.json()["detail"]
    assert listed["items"] == []
