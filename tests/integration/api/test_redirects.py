"""A redirect names a path, never the host the request claimed (a cache in front could keep a redirect to
``evil.example`` and serve it to everyone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.api._support import service


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/api/v1/workspaces/?limit=5", "/api/v1/workspaces?limit=5"),
        ("/health/live/", "/health/live"),
    ],
)
async def test_a_trailing_slash_redirect_is_relative(tmp_path: Path, path: str, location: str) -> None:
    async with service(tmp_path) as app:
        response = await app.client.get(path, headers={**app.admin(), "Host": "evil.example"})
        followed = await app.client.get(response.headers["location"], headers=app.admin())
    assert response.status_code == 307
    assert response.headers["location"] == location
    assert response.headers["x-content-type-options"] == "nosniff"
    assert followed.status_code == 200


async def test_the_api_docs_redirect_is_relative_and_the_docs_load(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        response = await app.client.get("/api/v1/ui", headers={"Host": "evil.example"})
        page = await app.client.get("/api/v1/ui/")
    assert (response.status_code, response.headers["location"]) == (307, "/api/v1/ui/")
    assert page.status_code == 200
