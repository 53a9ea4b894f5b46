"""The provider catalog: descriptors and schemas, readable by every authenticated user."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import API, default_workspace, issue_token, service


async def test_viewer_pages_through_the_catalog(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, viewer = await issue_token(app, ws, "VIEWER")
        ids: list[str] = []
        params: dict[str, str | int] = {"limit": 3}
        while True:
            response = await app.client.get(f"{API}/providers", headers=viewer, params=params)
            assert response.status_code == 200
            page = response.json()
            ids.extend(p["id"] for p in page["items"])
            if not page["page"]["hasMore"]:
                break
            params["cursor"] = page["page"]["nextCursor"]
        expected = sorted(d.provider_id for d in app.runtime.catalog.list())
        assert ids == expected
        assert "wepush.http" in ids


async def test_descriptor_and_schemas_of_the_http_provider(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        descriptor = await app.client.get(f"{API}/providers/wepush.http", headers=app.admin())
        assert descriptor.status_code == 200
        body = descriptor.json()
        assert (body["id"], body["threadSafety"], body["defaultTimeout"]) == (
            "wepush.http",
            "THREAD_SAFE",
            "PT30S",
        )
        assert body["capabilities"]["dryRun"] is True
        assert body["platforms"] == []  # any platform

        schemas = await app.client.get(f"{API}/providers/wepush.http/schemas", headers=app.admin())
        assert schemas.status_code == 200
        account = schemas.json()["account"]
        assert account["required"] == ["baseUrl"]
        assert account["properties"]["auth"]["properties"]["token"]["x-wepush-secret"] is True
        assert {"message", "recipient", "ui"} <= set(schemas.json())


async def test_unknown_provider_is_not_found_and_a_tampered_cursor_is_refused(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        missing = await app.client.get(f"{API}/providers/acme.pigeon", headers=app.admin())
        assert missing.status_code == 404
        tampered = await app.client.get(f"{API}/providers", headers=app.admin(), params={"cursor": "abc.def"})
        assert tampered.status_code == 400
        assert tampered.json()["code"] == "CURSOR_INVALID"
        anonymous = await app.client.get(f"{API}/providers/wepush.http")
        assert anonymous.status_code == 401
