"""Messages through the API: revision 1 on create, metadata updates, immutable revisions, validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import HTTP_CONTENT, create_message, expect, ws_url

NEW_CONTENT: dict[str, Any] = {**HTTP_CONTENT, "path": "/v2/notify"}


async def test_message_lifecycle_keeps_every_revision_unchanged(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            ws_url(ws, "messages"),
            headers=app.admin(),
            json={
                "name": "greeting",
                "description": "hello",
                "providerId": "wepush.http",
                "content": HTTP_CONTENT,
            },
        )
        message = expect(response, 201)
        assert response.headers["location"].endswith(f"/messages/{message['id']}")
        assert (message["latestRevision"], message["version"], message["providerId"]) == (1, 1, "wepush.http")
        url = ws_url(ws, "messages", message["id"])

        first = expect(await app.client.get(f"{url}/revisions/1", headers=app.admin()), 200)
        assert first["content"] == HTTP_CONTENT
        assert len(first["contentHash"]) == 64

        renamed = expect(
            await app.client.put(url, headers=app.admin(), json={"name": "greeting v2", "version": 1}), 200
        )
        assert (renamed["name"], renamed["description"], renamed["version"]) == ("greeting v2", "", 2)
        stale = await app.client.put(url, headers=app.admin(), json={"name": "late", "version": 1})
        assert (stale.status_code, stale.json()["code"]) == (409, "VERSION_CONFLICT")

        created = await app.client.post(
            f"{url}/revisions", headers=app.admin(), json={"content": NEW_CONTENT, "basedOnRevision": 1}
        )
        second = expect(created, 201)
        assert created.headers["location"].endswith(f"/messages/{message['id']}/revisions/2")
        assert second["revision"] == 2
        assert second["contentHash"] != first["contentHash"]
        outdated = await app.client.post(
            f"{url}/revisions", headers=app.admin(), json={"content": HTTP_CONTENT, "basedOnRevision": 1}
        )
        assert (outdated.status_code, outdated.json()["code"]) == (409, "VERSION_CONFLICT")
        assert outdated.json()["detail"] == f"message {message['id']} is at revision 2, not 1"
        ahead = await app.client.post(
            f"{url}/revisions", headers=app.admin(), json={"content": HTTP_CONTENT, "basedOnRevision": 9}
        )
        assert ahead.json()["detail"] == f"message {message['id']} is at revision 2, not 9"

        assert expect(await app.client.get(f"{url}/revisions/1", headers=app.admin()), 200) == first
        current = expect(await app.client.get(url, headers=app.admin()), 200)
        assert (current["latestRevision"], current["name"]) == (2, "greeting v2")
        missing = await app.client.get(f"{url}/revisions/3", headers=app.admin())
        assert missing.status_code == 404

        page = expect(await app.client.get(f"{url}/revisions", headers=app.admin(), params={"limit": 1}), 200)
        assert [r["revision"] for r in page["items"]] == [2]
        older = expect(
            await app.client.get(
                f"{url}/revisions",
                headers=app.admin(),
                params={"limit": 1, "cursor": page["page"]["nextCursor"]},
            ),
            200,
        )
        assert ([r["revision"] for r in older["items"]], older["page"]["hasMore"]) == ([1], False)

        assert (await app.client.delete(url, headers=app.admin())).status_code == 204
        assert (await app.client.get(url, headers=app.admin())).status_code == 404


async def test_content_is_checked_by_schema_then_by_the_provider(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)

        async def create(provider: str, content: dict[str, Any]) -> dict[str, Any]:
            response = await app.client.post(
                ws_url(ws, "messages"),
                headers=app.admin(),
                json={"name": "m", "providerId": provider, "content": content},
            )
            body: dict[str, Any] = response.json()
            body["status"] = response.status_code
            return body

        schema = await create("wepush.http", {"method": "FETCH"})
        assert (schema["status"], schema["code"]) == (400, "VALIDATION_FAILED")
        assert [e["field"] for e in schema["errors"]] == ["/content/method"]

        semantic = await create("wepush.http", {"method": "GET", "path": "/x", "bodyTemplate": "{}"})
        assert (semantic["status"], semantic["code"]) == (422, "PROVIDER_CONFIG_INVALID")
        assert [e["field"] for e in semantic["errors"]] == ["/content/bodyTemplate"]

        unknown = await create("wepush.nowhere", {})
        assert (unknown["status"], unknown["code"]) == (400, "VALIDATION_FAILED")
        assert [(e["field"], e["code"]) for e in unknown["errors"]] == [("/providerId", "UNKNOWN_PROVIDER")]

        message = await create_message(app, ws)
        revision = await app.client.post(
            ws_url(ws, "messages", message["id"], "revisions"),
            headers=app.admin(),
            json={"content": {"method": "GET", "bodyTemplate": "x"}, "basedOnRevision": 1},
        )
        assert revision.status_code == 422


async def test_creating_with_an_idempotency_key_is_safe_to_retry(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        headers = {**app.admin(), "Idempotency-Key": "message-1"}
        body = {"name": "once", "providerId": "wepush.http", "content": HTTP_CONTENT}
        first = expect(await app.client.post(ws_url(ws, "messages"), headers=headers, json=body), 201)
        again = expect(await app.client.post(ws_url(ws, "messages"), headers=headers, json=body), 201)
        assert again == first
        changed = await app.client.post(
            ws_url(ws, "messages"), headers=headers, json={**body, "name": "twice"}
        )
        assert (changed.status_code, changed.json()["code"]) == (409, "IDEMPOTENCY_CONFLICT")
        listed = expect(await app.client.get(ws_url(ws, "messages"), headers=app.admin()), 200)
        assert [m["id"] for m in listed["items"]] == [first["id"]]


async def test_messages_list_by_name_and_provider(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        order = await create_message(app, ws, "Order shipped")
        await create_message(app, ws, "Welcome")
        url = ws_url(ws, "messages")
        by_name = expect(await app.client.get(url, headers=app.admin(), params={"name": "SHIP"}), 200)
        assert [m["id"] for m in by_name["items"]] == [order["id"]]
        other = expect(
            await app.client.get(url, headers=app.admin(), params={"providerId": "wepush.smtp"}), 200
        )
        assert other["items"] == []
        first = expect(await app.client.get(url, headers=app.admin(), params={"limit": 1}), 200)
        assert first["page"]["hasMore"] is True
        reused = await app.client.get(
            url, headers=app.admin(), params={"limit": 1, "cursor": first["page"]["nextCursor"], "name": "x"}
        )
        assert (reused.status_code, reused.json()["code"]) == (400, "CURSOR_INVALID")


async def test_a_whole_number_written_as_a_float_is_the_same_content(tmp_path: Path) -> None:
    """A client that serialises floats sends 4096.0 where another sends 4096: one JSON number, so saving it
    again makes no revision, and the content is stored (and read by providers) as the integer."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        message = await create_message(app, ws, content={**HTTP_CONTENT, "responseBodyMaxBytes": 4096.0})
        url = ws_url(ws, "messages", message["id"])
        again = await app.client.post(
            f"{url}/revisions",
            headers=app.admin(),
            json={"content": {**HTTP_CONTENT, "responseBodyMaxBytes": 4096}, "basedOnRevision": 1},
        )
        first = expect(await app.client.get(f"{url}/revisions/1", headers=app.admin()), 200)
        changed = await app.client.post(
            f"{url}/revisions",
            headers=app.admin(),
            json={"content": {**HTTP_CONTENT, "responseBodyMaxBytes": 4096.5}, "basedOnRevision": 1},
        )

    assert (again.status_code, again.json()["revision"]) == (200, 1)
    raw = first["content"]["responseBodyMaxBytes"]
    assert (raw, type(raw)) == (4096, int)
    # Not a whole number: another value, which this integer field refuses (it would have been a revision).
    assert (changed.status_code, changed.json()["code"]) == (400, "VALIDATION_FAILED")


async def test_saving_the_latest_content_again_makes_no_revision(tmp_path: Path) -> None:
    """Seed: a content *change* makes a revision. The same content again (its keys in another order)
    answers 200 with the latest revision; the message, its version and its revisions stay as they were."""
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        content = {**HTTP_CONTENT, "responseBodyMaxBytes": 4096}
        message = await create_message(app, ws, content=content)
        url = ws_url(ws, "messages", message["id"])
        respelled = {key: content[key] for key in reversed(content)}

        again = await app.client.post(
            f"{url}/revisions",
            headers={**app.admin(), "Idempotency-Key": "same-content-1"},
            json={"content": respelled, "basedOnRevision": 1},
        )
        replayed = await app.client.post(
            f"{url}/revisions",
            headers={**app.admin(), "Idempotency-Key": "same-content-1"},
            json={"content": respelled, "basedOnRevision": 1},
        )
        current = expect(await app.client.get(url, headers=app.admin()), 200)
        revisions = expect(await app.client.get(f"{url}/revisions", headers=app.admin()), 200)
        changed = await app.client.post(
            f"{url}/revisions", headers=app.admin(), json={"content": NEW_CONTENT, "basedOnRevision": 1}
        )

    assert (again.status_code, again.json()["revision"]) == (200, 1)
    assert "location" not in again.headers
    assert (replayed.status_code, replayed.json()) == (200, again.json())
    assert (current["latestRevision"], current["version"]) == (message["latestRevision"], message["version"])
    assert [r["revision"] for r in revisions["items"]] == [1]
    assert (changed.status_code, changed.json()["revision"]) == (201, 2)
