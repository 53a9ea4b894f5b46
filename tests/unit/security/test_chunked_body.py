"""ChunkedBodyMiddleware: a chunked JSON body reaches the application whole, with a Content-Length and
without Transfer-Encoding; any other body, and a JSON body with a length, passes through as sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from wepush.server.api.middleware import ChunkedBodyMiddleware


class Recorder:
    """An ASGI app that keeps the headers and the body messages it was given."""

    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.messages: list[Message] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.headers = dict(scope["headers"])
        while True:
            message = await receive()
            self.messages.append(message)
            if not message.get("more_body", False):
                break
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _pieces(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _send(recorder: Recorder, content: Any, content_type: str) -> None:
    transport = httpx.ASGITransport(app=ChunkedBodyMiddleware(recorder))
    async with httpx.AsyncClient(transport=transport, base_url="http://wepush.local") as client:
        response = await client.post("/api/v1/x", content=content, headers={"Content-Type": content_type})
    assert response.status_code == 204


@pytest.mark.parametrize("content_type", ["application/json", "application/merge-patch+json; charset=utf-8"])
async def test_a_chunked_json_body_arrives_whole_with_its_length(content_type: str) -> None:
    recorder = Recorder()
    await _send(recorder, _pieces(b'{"name":', b' "a', b'"}'), content_type)

    assert recorder.headers[b"content-length"] == b"13"
    assert b"transfer-encoding" not in recorder.headers
    assert [m["body"] for m in recorder.messages] == [b'{"name": "a"}']


async def test_another_chunked_body_streams_through_as_sent() -> None:
    recorder = Recorder()
    await _send(recorder, _pieces(b"mobile\n", b"1\n", b"2\n"), "text/csv")

    assert recorder.headers[b"transfer-encoding"] == b"chunked"
    assert b"content-length" not in recorder.headers
    assert [m["body"] for m in recorder.messages if m["body"]] == [b"mobile\n", b"1\n", b"2\n"]


async def test_a_json_body_with_its_length_passes_as_it_is() -> None:
    recorder = Recorder()
    await _send(recorder, b'{"name": "a"}', "application/json")

    assert recorder.headers[b"content-length"] == b"13"
    assert b"".join(m["body"] for m in recorder.messages) == b'{"name": "a"}'
