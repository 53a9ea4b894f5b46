"""A resource name is stored in Unicode normal form C: "café" sent as ``e`` + U+0301 is the "café" of
U+00E9, so it cannot be a second resource that looks the same; the rest of the body is left as sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.api._support import API, default_workspace, service
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
