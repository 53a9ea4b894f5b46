"""A resource name is stored in Unicode normal form C: "café" sent as ``e`` + U+0301 is the "café" of
U+00E9, so it cannot be a second resource that looks the same; the rest of the body is left as sent. A
``name`` list filter is matched in NFC too, so a decomposed filter finds the names it looks like."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers_app import RunningApp
from tests.integration.api._support import API, accounts_url, default_workspace, http_account, service
from tests.integration.api._support_content import HTTP_CONTENT, expect, job_body, job_world, ws_url
from wepush.server.composition import load_openapi

_COMPOSED = "caf\u00e9"
_DECOMPOSED = "cafe\u0301"


async def test_a_decomposed_name_is_stored_composed_and_collides_with_the_composed_one(
    tmp_path: Path,
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        url = f"{API}/workspaces/{ws}/audiences"
        first = await app.client.post(
            url, headers=app.admin(), json={"name": _DECOMPOSED, "description": _DECOMPOSED}
        )
        second = await app.client.post(url, headers=app.admin(), json={"name": _COMPOSED})
    assert first.status_code == 201, first.text
    assert first.json()["name"] == _COMPOSED
    assert first.json()["description"] == _DECOMPOSED  # only names are normalised
    assert second.status_code == 400
    assert second.json()["errors"][0]["code"] == "NAME_ALREADY_USED"


async def _pages(app: RunningApp, url: str, params: dict[str, Any]) -> list[list[str]]:
    """The names on every page of a listing, following each cursor with the same filter."""
    pages: list[list[str]] = []
    query = dict(params)
    while True:
        body = expect(await app.client.get(url, headers=app.admin(), params=query), 200)
        pages.append([item["name"] for item in body["items"]])
        if not body["page"]["hasMore"]:
            return pages
        query["cursor"] = body["page"]["nextCursor"]


async def test_a_decomposed_name_filter_finds_the_composed_names_on_every_page(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        world = await job_world(app, ws)
        bodies = {
            f"{API}/workspaces": {},
            ws_url(ws, "audiences"): {},
            ws_url(ws, "messages"): {"providerId": "wepush.http", "content": HTTP_CONTENT},
            accounts_url(ws): http_account(),
            ws_url(ws, "jobs"): job_body(world),
        }
        for url, body in bodies.items():
            for number in (1, 2):
                created = await app.client.post(
                    url, headers=app.admin(), json={**body, "name": f"{_DECOMPOSED} {number}"}
                )
                assert expect(created, 201)["name"] == f"{_COMPOSED} {number}"
            for needle in (_DECOMPOSED, "CAFE\u0301", "CAF\u00c9"):
                # limit 1: the second page comes from a cursor bound to the filter as sent.
                pages = await _pages(app, url, {"name": needle, "limit": 1})
                assert pages == [[f"{_COMPOSED} 2"], [f"{_COMPOSED} 1"]], (url, needle)


def _resolved(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_top_level_name_of_a_request_body_is_a_resource_name() -> None:
    """The body parser normalises a body's top-level ``name`` as a resource name: keep that true."""
    spec = load_openapi()
    named = []
    for item in spec["paths"].values():
        for operation in item.values():
            if not isinstance(operation, dict) or "requestBody" not in operation:
                continue
            for content in operation["requestBody"]["content"].values():
                schema = _resolved(spec, content.get("schema", {}))
                parts = [schema, *(_resolved(spec, part) for part in schema.get("allOf", []))]
                for part in parts:
                    if "name" in part.get("properties", {}):
                        named.append((operation["operationId"], part["properties"]["name"]))
    assert len(named) >= 13
    assert all(ref == {"$ref": "#/components/schemas/ResourceNameInput"} for _, ref in named), named
