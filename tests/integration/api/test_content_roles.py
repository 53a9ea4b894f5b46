"""Roles on messages, audiences, imports and jobs: VIEWER reads everything and changes nothing; OPERATOR
writes; every change is audited with field names only."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api._support import default_workspace, issue_token, service
from tests.integration.api._support_content import (
    HTTP_CONTENT,
    expect,
    import_url,
    job_body,
    job_world,
    start_import,
    ws_url,
)


async def test_viewer_reads_but_cannot_change_anything(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        job = expect(
            await app.client.post(ws_url(ws, "jobs"), headers=app.admin(), json=job_body(world)), 201
        )
        snapshot = expect(
            await app.client.get(
                ws_url(ws, "audience-snapshots", world["audienceSnapshotId"]), headers=app.admin()
            ),
            200,
        )
        audience_id = snapshot["audienceId"]
        started = await start_import(app, ws, audience_id)
        _, viewer = await issue_token(app, ws, "VIEWER")

        reads = [
            ws_url(ws, "messages"),
            ws_url(ws, "messages", world["messageId"]),
            ws_url(ws, "messages", world["messageId"], "revisions"),
            ws_url(ws, "messages", world["messageId"], "revisions", "1"),
            ws_url(ws, "audiences"),
            ws_url(ws, "audiences", audience_id),
            ws_url(ws, "audiences", audience_id, "snapshots"),
            ws_url(ws, "audience-snapshots", snapshot["id"]),
            ws_url(ws, "audience-snapshots", snapshot["id"], "recipients"),
            import_url(ws, audience_id, started["id"]),
            ws_url(ws, "jobs"),
            ws_url(ws, "jobs", job["id"]),
        ]
        for url in reads:
            assert (await app.client.get(url, headers=viewer)).status_code == 200, url

        writes = [
            (
                "POST",
                ws_url(ws, "messages"),
                {"name": "m", "providerId": "wepush.http", "content": HTTP_CONTENT},
            ),
            ("PUT", ws_url(ws, "messages", world["messageId"]), {"name": "m", "version": 1}),
            ("DELETE", ws_url(ws, "messages", world["messageId"]), None),
            (
                "POST",
                ws_url(ws, "messages", world["messageId"], "revisions"),
                {"content": HTTP_CONTENT, "basedOnRevision": 1},
            ),
            ("POST", ws_url(ws, "audiences"), {"name": "a"}),
            ("PUT", ws_url(ws, "audiences", audience_id), {"name": "a", "version": 2}),
            ("DELETE", ws_url(ws, "audiences", audience_id), None),
            ("POST", import_url(ws, audience_id), {"format": "CSV", "fieldMapping": {"m": "m"}}),
            ("POST", import_url(ws, audience_id, started["id"], "commit"), {"version": 2}),
            ("POST", ws_url(ws, "jobs"), job_body(world)),
            ("PUT", ws_url(ws, "jobs", job["id"]), job_body(world, policies={}, version=1)),
            ("DELETE", ws_url(ws, "jobs", job["id"]), None),
        ]
        for method, url, body in writes:
            response = await app.client.request(method, url, headers=viewer, json=body)
            assert (response.status_code, response.json()["code"]) == (403, "ACCESS_DENIED"), (method, url)
        upload = await app.client.put(
            import_url(ws, audience_id, started["id"], "content"),
            headers={**viewer, "Content-Type": "text/csv"},
            content=b"mobile,name\n1,a\n",
        )
        assert upload.status_code == 403
        unchanged = expect(
            await app.client.get(import_url(ws, audience_id, started["id"]), headers=viewer), 200
        )
        assert unchanged["state"] == "CREATED"


async def test_operator_changes_are_audited_with_field_names_and_no_values(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        _, operator = await issue_token(app, ws, "OPERATOR")
        body = {
            "name": "secretive",
            "providerId": "wepush.http",
            "content": {**HTTP_CONTENT, "path": "/p-4711"},
        }
        message = expect(await app.client.post(ws_url(ws, "messages"), headers=operator, json=body), 201)
        url = ws_url(ws, "messages", message["id"])
        expect(await app.client.put(url, headers=operator, json={"name": "renamed-0815", "version": 1}), 200)

        events = expect(
            await app.client.get(
                ws_url(ws, "audit-events"), headers=app.admin(), params={"resourceId": message["id"]}
            ),
            200,
        )["items"]
        by_action = {event["action"]: event for event in events}
        assert by_action["message.create"]["details"]["fieldNames"] == [
            "content",
            "description",
            "name",
            "providerId",
        ]
        assert by_action["message.update"]["details"]["fieldNames"] == ["name"]
        assert by_action["message.update"]["resourceType"] == "MESSAGE"
        text = str(events)
        assert "renamed-0815" not in text
        assert "p-4711" not in text
