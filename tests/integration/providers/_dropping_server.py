"""A loopback HTTP/1.1 server that reads a request whole and then hangs up without answering.

This is the "connection lost after the request was sent" case: the vendor has the message (and may
deliver it) while the caller never hears back. ``answer`` decides per request: a
:class:`ScriptedResponse` is sent back (an access token, say), ``None`` drops the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from yarl import URL

from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse

__all__ = ["DroppingServer", "drop_every_request"]

Answer = Callable[[RecordedRequest], ScriptedResponse | None]


def drop_every_request(_request: RecordedRequest) -> None:
    return None


class DroppingServer:
    """Use as ``async with DroppingServer(answer) as server``; ``dropped`` lists what it hung up on."""

    def __init__(self, answer: Answer = drop_every_request) -> None:
        self._answer = answer
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self.requests: list[RecordedRequest] = []
        self.dropped: list[RecordedRequest] = []

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> DroppingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in tuple(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            # Keep-alive: a token fetch and the send may share one connection.
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                scripted = self._answer(request)
                if scripted is None:
                    self.dropped.append(request)
                    return
                writer.write(_serialised(scripted))
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().title()] = value.strip()
    assert "chunked" not in headers.get("Transfer-Encoding", ""), "the providers send sized bodies"
    body = await reader.readexactly(int(headers.get("Content-Length", "0")))
    url = URL(target)
    return RecordedRequest(
        method, url.path, MappingProxyType(dict(url.query)), MappingProxyType(headers), body
    )


def _serialised(scripted: ScriptedResponse) -> bytes:
    payload, content_type = scripted.payload()
    headers = {"Content-Length": str(len(payload)), **scripted.headers}
    if content_type is not None:
        headers.setdefault("Content-Type", content_type)
    head = f"HTTP/1.1 {scripted.status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + payload
