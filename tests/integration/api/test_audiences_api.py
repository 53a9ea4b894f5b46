"""Audiences through the API: metadata with optimistic versions; recipients only change through snapshots."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import (
    create_audience,
    create_message,
    expect,
    http_account_id,
    job_body,
    snapshot_of,
    ws_url,
)


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
        # The detail names the version there is, whichever side of it the request was.
        assert stale.json()["detail"].endswith("is at version 2, not 1")
        ahead = await app.client.put(url, headers=app.admin(), json={"name": "early", "version": 6})
        assert ahead.json()["detail"].endswith("is at version 2, not 6")

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


async def test_two_idempotency_keys_are_refused_and_create_nothing(tmp_path: Path) -> None:
    """With two keys, a retry could repeat either: the request is refused rather than one key picked."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            ws_url(ws, "audiences"),
            headers=[*app.admin().items(), ("Idempotency-Key", "a"), ("Idempotency-Key", "b")],
            json={"name": "twice"},
        )
        listed = expect(await app.client.get(ws_url(ws, "audiences"), headers=app.admin()), 200)
    problem = expect(response, 400)
    assert problem["code"] == "VALIDATION_FAILED"
    assert [error["field"] for error in problem["errors"]] == ["Idempotency-Key"]
    assert listed["items"] == []


async def test_a_deleted_audience_takes_its_snapshots_and_recipients_out_of_sight(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        snapshot = await snapshot_of(app, ws, [("13800000001", "Ann")], name="leaving")
        kept = await snapshot_of(app, ws, [("13800000002", "Bob")], name="staying")
        audience_url = ws_url(ws, "audiences", snapshot["audienceId"])
        assert (await app.client.delete(audience_url, headers=app.admin())).status_code == 204

        for gone in (
            ws_url(ws, "audience-snapshots", snapshot["id"]),
            ws_url(ws, "audience-snapshots", snapshot["id"], "recipients"),
            f"{audience_url}/snapshots",
        ):
            answer = await app.client.get(gone, headers=app.admin())
            assert (answer.status_code, answer.json()["code"]) == (404, "RESOURCE_NOT_FOUND"), gone
        world = {
            "accountId": await http_account_id(app, ws),
            "messageId": (await create_message(app, ws))["id"],
            "audienceSnapshotId": snapshot["id"],
        }
        refused = await app.client.post(ws_url(ws, "jobs"), headers=app.admin(), json=job_body(world))
        assert refused.status_code == 400, refused.text
        assert [e["field"] for e in refused.json()["errors"]] == ["/audienceSnapshotId"]
        # Another audience's snapshot is untouched.
        recipients = expect(
            await app.client.get(
                ws_url(ws, "audience-snapshots", kept["id"], "recipients"), headers=app.admin()
            ),
            200,
        )
        assert [r["itemId"] for r in recipients["items"]] == ["13800000002"]
