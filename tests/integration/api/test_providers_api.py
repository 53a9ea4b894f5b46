"""The provider catalog: descriptors and schemas, readable by every authenticated user."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.integration.api._support import API, default_workspace, issue_token, service
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.spi import ProviderDescriptor, ProviderSchemas


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


HOSTILE = '<b>Sends</b> to <a href="javascript:alert(1)" onclick="x()">vendors</a><script>alert(1)</script>'


class _HostileTexts(FakeProviderFactory):
    """A provider (a plugin, say) whose descriptor carries markup meant to run in an operator's browser."""

    def descriptor(self) -> ProviderDescriptor:
        base = super().descriptor()
        account = {
            "type": "object",
            "title": 'Account <img src=x onerror="alert(1)">',
            "properties": {
                # A property named like a keyword is a schema, and data strings stay as written.
                "title": {
                    "type": "string",
                    "description": "Shown <i>as</i> a heading",
                    "pattern": "^<[a-z]+>$",
                },
                "mode": {"enum": ["<raw>"], "default": "<raw>"},
            },
        }
        ui = {"type": "object", "description": '<p style="x">Layout</p> <a href="https://e.example">help</a>'}
        return dataclasses.replace(
            base,
            description=HOSTILE,
            schemas=ProviderSchemas(
                account=account, message=base.schemas.message, recipient=base.schemas.recipient, ui=ui
            ),
        )


async def test_rich_text_from_a_provider_is_cleaned_of_dangerous_html(tmp_path: Path) -> None:
    catalog = ProviderCatalog.from_factories([_HostileTexts()])
    async with service(tmp_path, catalog=catalog) as app:
        descriptor = await app.client.get(f"{API}/providers/wepush.fake", headers=app.admin())
        schemas = await app.client.get(f"{API}/providers/wepush.fake/schemas", headers=app.admin())
        listed = await app.client.get(f"{API}/providers", headers=app.admin())

    assert descriptor.status_code == schemas.status_code == listed.status_code == 200
    cleaned = '<b>Sends</b> to <a rel="noopener noreferrer">vendors</a>'
    assert descriptor.json()["description"] == cleaned
    assert [item["description"] for item in listed.json()["items"]] == [cleaned]
    account, ui = schemas.json()["account"], schemas.json()["ui"]
    assert account["title"] == "Account "
    assert account["properties"]["title"] == {
        "type": "string",
        "description": "Shown <i>as</i> a heading",
        "pattern": "^<[a-z]+>$",
    }
    assert account["properties"]["mode"] == {"enum": ["<raw>"], "default": "<raw>"}
    assert ui["description"] == '<p>Layout</p> <a href="https://e.example" rel="noopener noreferrer">help</a>'
