"""Connections that send too slowly are closed: headers must arrive within a deadline, and a body may not
fall silent; a slow but steady body and an idle keep-alive between quick requests are unaffected.

Real uvicorn on loopback with the Service's HTTP protocol, its deadlines shortened for the test; a small
ASGI app stands in for the Service, whose requests this protocol sees the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import Receive, Scope, Send

from tests.helpers_process import free_port
from wepush.server.api._http_protocol import ProblemHttpToolsProtocol

SHORT = 0.5


class ShortDeadlines(ProblemHttpToolsProtocol):
    headers_timeout = SHORT
    body_idle_timeout = SHORT


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = str(size).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def server(protocol: type[ProblemHttpToolsProtocol] = ShortDeadlines) -> AsyncIterator[int]:
    """uvicorn on a free loopback port, serving :func:`echo_length` with ``protocol``."""
    port = free_port()
    config = uvicorn.Config(
        echo_length, host="127.0.0.1", port=port, http=protocol, log_config=None, lifespan="off"
    )
    running = uvicorn.Server(config)
    task = asyncio.create_task(running.serve())
    try:
        while not running.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield port
    finally:
        running.should_exit = True
        await task


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before closing (fails the test if it does not close within 10 s)."""
    return await asyncio.wait_for(reader.read(), 10)


async def test_a_connection_that_never_finishes_its_headers_is_closed() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")  # no blank line: the headers never end
        await writer.drain()
        answered = await _closed(reader)
        writer.close()
    assert answered == b""


async def test_a_body_that_falls_silent_is_closed() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly eleven")
        await writer.drain()
        answered = await _closed(reader)
        writer.close()
    assert answered == b""


async def test_a_slow_but_steady_body_and_a_second_request_are_served() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n")
        for _ in range(40):  # in all four times the idle deadline, never silent for a tenth of it
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(SHORT / 10)
        first = await asyncio.wait_for(reader.readuntil(b"40"), 10)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n2"), 10)
        writer.close()
    assert first.startswith(b"HTTP/1.1 200")
    assert second.startswith(b"HTTP/1.1 200")
