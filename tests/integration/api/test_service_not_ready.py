"""A request that reaches the Service before it has started (or after it began to stop) is told to retry:
503 SERVICE_NOT_READY with Retry-After, not an internal error."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers_app import standalone_config
from wepush.server.composition._service import build_service_app


async def test_a_request_before_start_up_is_503_service_not_ready(tmp_path: Path) -> None:
    app, _runtime = build_service_app(standalone_config(tmp_path))
    # No lifespan: the runtime has not started, as while a slow start-up migrates the database.
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w") as http:
        answer = await http.get("/api/v1/workspaces", headers={"Authorization": "Bearer wpa_not_checked_yet"})
    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["code"] == "SERVICE_NOT_READY"
