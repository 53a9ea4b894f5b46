"""Audiences through the API: metadata with optimistic versions; recipients only change through snapshots."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import create_audience, expect, ws_url


async def test_audience_metadata_lifecycle(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            ws_url(ws, "audiences"),
            headers=app.admin(),
            json={"name": "VIP customers", "description": "gold"},
        )
        audience = expect(response, 201)
        assert response.headers["location"].endswith(f"/audiences/{audience['id']}")
        assert (audience["latestSnapshotId"], audience["latestRevision"], audience["recipientCount"]) == (
            None,
            0,
            0,
        )
        url = ws_url(ws, "audiences", audience["id"])
        assert expect(await app.client.get(url, headers=app.admin()), 200) == audience

        renamed = expect(
            await app.client.put(url, headers=app.admin(), json={"name": "VIPs", "version": 1}), 200
        )
        assert (renamed["name"], renamed["description"], renamed["version"]) == ("VIPs", "", 2)
        stale = await app.client.put(url, headers=app.admin(), json={"name": "late", "version": 1})
        assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")

        snapshots = expect(await app.client.get(f"{url}/snapshots", headers=app.admin()), 200)
        assert snapshots == {"items": [], "page": {"nextCursor": None, "hasMore": False}}

        await create_audience(app, ws, "Newsletter")
        found = expect(
            await app.client.get(ws_url(ws, "audiences"), headers=app.admin(), params={"name": "vip"}), 200
        )
        assert [a["id"] for a in found["items"]] == [audience["id"]]

        assert (await app.client.delete(url, headers=app.admin())).status_code == 204
        assert (await app.client.get(url, headers=app.admin())).status_code == 404
        assert (
            await app.client.get(ws_url(ws, "audience-snapshots", "missing"), headers=app.admin())
        ).status_code == 404


async def test_create_audience_is_idempotent_per_key(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        headers = {**app.admin(), "Idempotency-Key": "audience-1"}
        first = expect(
            await app.client.post(ws_url(ws, "audiences"), headers=headers, json={"name": "a"}), 201
        )
        again = expect(
            await app.client.post(ws_url(ws, "audiences"), headers=headers, json={"name": "a"}), 201
        )
        assert again == first
        other = await app.client.post(ws_url(ws, "audiences"), headers=headers, json={"name": "b"})
        assert (other.status_code, other.json()["code"]) == (409, "IDEMPOTENCY_CONFLICT")
