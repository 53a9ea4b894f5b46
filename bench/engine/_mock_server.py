"""A minimal keep-alive HTTP/1.1 vendor mock for benchmarks, run in its own process.

It answers every request with the same small JSON body, on loopback only. It
is written on bare ``asyncio.Protocol`` so the server side costs as little CPU
as possible and the client under test stays the bottleneck.

Run: ``python -m bench.engine._mock_server``; it prints ``PORT <n>`` and serves
until its standard input closes.
"""

from __future__ import annotations

import asyncio
import sys

_BODY = b'{"success":true}'
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Request-Id: bench\r\nContent-Length: "
    + str(len(_BODY)).encode()
    + b"\r\n\r\n"
    + _BODY
)


class _Exchange(asyncio.Protocol):
    __slots__ = ("_buffer", "_transport")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        answers = 0
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = bytes(buffer[:end]).lower()
            length = 0
            marker = head.find(b"content-length:")
            if marker >= 0:
                line_end = head.find(b"\r\n", marker)
                length = int(head[marker + 15 : line_end if line_end >= 0 else None])
            total = end + 4 + length
            if len(buffer) < total:
                break
            del buffer[:total]
            answers += 1
        if answers and self._transport is not None:
            self._transport.write(_RESPONSE * answers)


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Exchange, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    # Stop when the parent closes our stdin (or dies).
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(_serve())
