"""A JSON body sent chunked (no Content-Length, as streaming clients send it) is read and validated like
any other; before, Connexion took it for a missing body and answered "RequestBody is required"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.helpers_app import running_app, standalone_config
from tests.integration.api._support import API, default_workspace, service
from tests.integration.api._support_content import create_audience, expect, import_url, start_import

CHUNKED = {"Content-Type": "application/json"}


async def _chunked(document: Any, size: int = 7) -> AsyncIterator[bytes]:
    raw = json.dumps(document).encode()
    for start in range(0, len(raw), size):
        yield raw[start : start + size]


async def test_a_chunked_json_body_creates_the_resource(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        request = app.client.build_request(
            "POST",
            f"{API}/workspaces/{ws}/audiences",
            headers={**app.admin(), **CHUNKED},
            content=_chunked({"name": "streamed", "description": "sent in pieces"}),
        )
        assert "content-length" not in request.headers
        assert request.headers["transfer-encoding"] == "chunked"
        created = expect(await app.client.send(request), 201)
        read = expect(
            await app.client.get(f"{API}/workspaces/{ws}/audiences/{created['id']}", headers=app.admin()), 200
        )

    assert (read["name"], read["description"]) == ("streamed", "sent in pieces")


async def test_a_chunked_body_is_validated_like_any_other(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            f"{API}/workspaces/{ws}/audiences",
            headers={**app.admin(), **CHUNKED},
            content=_chunked({"name": 5}),
        )
        problem = expect(response, 400)

    assert problem["code"] == "VALIDATION_FAILED"
    assert [error["field"] for error in problem["errors"]] == ["/name"]


async def test_a_chunked_body_over_the_limit_is_refused_with_413(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path, WEPUSH_SERVER_MAX_BODY_BYTES="1024")) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            f"{API}/workspaces/{ws}/audiences",
            headers={**app.admin(), **CHUNKED},
            content=_chunked({"name": "big", "description": "x" * 4096}, size=256),
        )
        problem = expect(response, 413)

    assert problem["code"] == "PAYLOAD_TOO_LARGE"


async def test_the_import_upload_still_streams_a_chunked_file(tmp_path: Path) -> None:
    async def file() -> AsyncIterator[bytes]:
        yield b"mobile,name\n"
        for n in range(3):
            yield f"138000{n},n{n}\n".encode()

    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        response = await app.client.put(
            import_url(ws, audience["id"], started["id"], "content"),
            headers={**app.admin(), "Content-Type": "text/csv"},
            content=file(),
        )
        staged = expect(response, 200)

    assert (staged["state"], staged["counts"]["acceptedRows"]) == ("STAGED", 3)
