"""A request whose line and headers exceed the limit is answered 431 problem+json and its connection closed,
as soon as the limit is passed; requests within it, and a large body pipelined before a small request in
one write, are served as before.

Real uvicorn on loopback with the Service's HTTP protocol and a small ASGI app that echoes the body's
length (the app of the slow-client tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from tests.integration.service.test_slow_clients import server as serve_with
from wepush.server.api._http_protocol import MAX_HEAD_BYTES, ProblemHttpToolsProtocol


def server() -> contextlib.AbstractAsyncContextManager[int]:
    return serve_with(ProblemHttpToolsProtocol)  # the Service's own deadlines


async def _exchange(port: int, *chunks: bytes) -> bytes:
    """Send ``chunks`` (one write each) and read until the server closes or 10 s pass."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def _problem(answer: bytes) -> dict[str, object]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower()
    document: dict[str, object] = json.loads(body)
    return document


async def test_a_header_past_the_limit_is_answered_431_without_waiting_for_its_end() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"a" * (MAX_HEAD_BYTES + 1024))
        await writer.drain()  # the header line never ends: the answer comes from its size alone
        answered = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        after = await _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answered.startswith(b"HTTP/1.1 431 ")
    problem = _problem(answered)
    assert (problem["status"], problem["code"]) == (431, "PAYLOAD_TOO_LARGE")
    assert "a" * 64 not in answered.decode("latin-1")
    assert after.startswith(b"HTTP/1.1 200 ")


async def test_many_small_headers_past_the_limit_sent_slowly_are_refused_too() -> None:
    line = b"X-Part: " + b"b" * 1000 + b"\r\n"
    chunks = [b"GET / HTTP/1.1\r\nHost: x\r\n", *([line * 8] * ((MAX_HEAD_BYTES // (len(line) * 8)) + 2))]
    async with server() as port:
        answered = await _exchange(port, *chunks)
    assert answered.startswith(b"HTTP/1.1 431 ")


async def test_headers_within_the_limit_are_served() -> None:
    headers = b"".join(b"X-Part-%d: %s\r\n" % (i, b"c" * 1000) for i in range(MAX_HEAD_BYTES // 1100))
    async with server() as port:
        answered = await _exchange(
            port,
            b"POST / HTTP/1.1\r\nHost: x\r\n" + headers + b"Content-Length: 2\r\nConnection: close\r\n\r\nok",
        )
    assert answered.startswith(b"HTTP/1.1 200 ")
    assert answered.endswith(b"\r\n\r\n2")


async def test_a_large_body_pipelined_with_the_next_request_is_not_counted_as_headers() -> None:
    body = b"d" * (4 * MAX_HEAD_BYTES)
    first = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    second = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    async with server() as port:
        answered = await _exchange(port, first + second)
    assert answered.count(b"HTTP/1.1 200 ") == 2
    assert b"\r\n\r\n%d" % len(body) in answered
    assert answered.endswith(b"\r\n\r\n2")


async def test_a_head_just_over_the_limit_is_refused_whether_it_arrives_whole_or_in_two_pieces() -> None:
    # The chunk that completes a head is parsed before it can be counted: the parsed head is measured.
    line = b"X-Pad: " + b"e" * (MAX_HEAD_BYTES + 4000) + b"\r\n"
    head = b"GET / HTTP/1.1\r\nHost: x\r\n" + line + b"Connection: close\r\n\r\n"
    small = b"".join(b"X-H-%d: v\r\n" % i for i in range(MAX_HEAD_BYTES // 10))
    many = b"GET / HTTP/1.1\r\nHost: x\r\n" + small + b"Connection: close\r\n\r\n"
    async with server() as port:
        whole = await _exchange(port, head)
        halves = await _exchange(port, head[: len(head) // 2], head[len(head) // 2 :])
        many_small = await _exchange(port, many)
    assert whole.startswith(b"HTTP/1.1 431 ")
    assert halves.startswith(b"HTTP/1.1 431 ")
    assert many_small.startswith(b"HTTP/1.1 431 ")
    assert b"HTTP/1.1 200" not in whole + halves + many_small
