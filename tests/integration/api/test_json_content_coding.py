"""A JSON request body is read as sent: one with a content coding (gzip) is 415 naming the header, not a
400 about UTF-8 that hides the cause; ``identity`` is no coding at all. Nothing is created."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.integration.api._support import API, default_workspace, service


@pytest.mark.parametrize("coding", ["gzip", "br", "identity, gzip"])
async def test_a_json_body_with_a_content_coding_is_415_and_creates_nothing(
    tmp_path: Path, coding: str
) -> None:
    body = gzip.compress(json.dumps({"name": "customers"}).encode())
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        url = f"{API}/workspaces/{ws}/audiences"
        headers = {**app.admin(), "Content-Type": "application/json", "Content-Encoding": coding}
        refused = await app.client.post(url, headers=headers, content=body)
        listed = await app.client.get(url, headers=app.admin())
    assert refused.status_code == 415
    assert refused.json()["code"] == "VALIDATION_FAILED"
    assert "Content-Encoding" in refused.json()["detail"]
    assert [error["field"] for error in refused.json()["errors"]] == ["Content-Encoding"]
    assert listed.json()["items"] == []


async def test_identity_is_no_coding(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        headers = {**app.admin(), "Content-Encoding": "identity"}
        created = await app.client.post(
            f"{API}/workspaces/{ws}/audiences", headers=headers, json={"name": "c"}
        )
    assert created.status_code == 201, created.text
