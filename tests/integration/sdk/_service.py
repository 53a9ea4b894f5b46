"""A scripted stand-in for the WePush Service: a real aiohttp server on loopback, in its own thread.

The synchronous SDK blocks its caller, so the server cannot share the test's event loop: it runs its own
loop in a background thread. Tests queue answers per ``(method, path)``; each answer is an async function
that may misbehave on purpose (drop the connection mid-body, stream events then vanish, ...). Every request
is recorded with its headers, body and how the body arrived (chunked or not, in how many HTTP chunks).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

WS = "ws-1"
TOKEN = "wp_live_9f8e7d6c5b4a3210-secret"


@dataclass(frozen=True, slots=True)
class Seen:
    method: str
    path: str
    query: Mapping[str, str]
    headers: CIMultiDictProxy[str]
    body: bytes
    chunked: bool
    http_chunks: int


Action = Callable[[web.Request], Awaitable[web.StreamResponse]]


def reply(status: int = 200, body: Any = None, *, headers: Mapping[str, str] | None = None) -> Action:
    async def action(request: web.Request) -> web.StreamResponse:
        if body is None:
            return web.Response(status=status, headers=dict(headers or {}))
        return web.json_response(body, status=status, headers=dict(headers or {}))

    return action


def problem(status: int, code: str, *, headers: Mapping[str, str] | None = None, **extra: Any) -> Action:
    document = {
        "type": f"https://wepush.example/errors/{code.lower().replace('_', '-')}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "code": code,
        "detail": f"scripted {code}",
        "traceId": "trace-123",
        "errors": [],
        **extra,
    }

    async def action(request: web.Request) -> web.StreamResponse:
        return web.Response(
            status=status,
            body=json.dumps(document).encode(),
            content_type="application/problem+json",
            headers=dict(headers or {}),
        )

    return action


def drop_mid_body(partial: bytes = b'{"id": "acc-1", "na') -> Action:
    """Promise a longer JSON body, send the first bytes, then cut the connection."""

    async def action(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", "Content-Length": "4096"}
        )
        await response.prepare(request)
        await response.write(partial)
        await cut(request)
        return response

    return action


def sse(*frames: str, end: str = "drop", heartbeat: float = 0.05) -> Action:
    """Stream ``frames`` as text/event-stream, then ``end``: "drop" the connection, "close" it cleanly, or
    "hold" it open with heartbeat comments until the client goes away."""

    async def action(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for frame in frames:
            await response.write(frame.encode())
            await asyncio.sleep(0.01)
        if end == "drop":
            await cut(request)
        elif end == "hold":
            try:
                while True:
                    await asyncio.sleep(heartbeat)
                    await response.write(b": heartbeat\n\n")
            except (ConnectionError, RuntimeError):
                return response
        else:
            await response.write_eof()
        return response

    return action


async def cut(request: web.Request) -> None:
    """Abort the connection once everything written so far has left the server (abort drops buffers)."""
    transport = request.transport
    if transport is not None:
        # asyncio offers no "write buffer empty" event to await, so poll it briefly.
        while transport.get_write_buffer_size():  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        transport.abort()


def event_frame(sequence: int, event_type: str = "PROGRESS", run_id: str = "run-1", **data: Any) -> str:
    payload = {
        "runId": run_id,
        "sequence": sequence,
        "type": event_type,
        "occurredAt": "2026-08-22T08:31:00Z",
        "data": data or {"succeeded": sequence},
    }
    return f"id: {sequence}\nevent: {event_type.lower()}\ndata: {json.dumps(payload)}\n\n"


class ScriptedService:
    """Use as ``with ScriptedService() as service``; ``service.endpoint`` is its base URL."""

    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], deque[Action]] = {}
        self._lock = threading.Lock()
        self.requests: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="scripted-service", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, method: str, path: str, *actions: Action) -> None:
        with self._lock:
            self._queues.setdefault((method.upper(), path), deque()).extend(actions)

    def seen(self, method: str, path: str) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.method == method.upper() and r.path == path]

    def __enter__(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        # Handlers still sleeping (a deliberately slow answer) would otherwise die with the loop.
        leftovers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = bytearray()
        http_chunks = 0
        if request.body_exists:
            async for data, end_of_http_chunk in request.content.iter_chunks():
                body.extend(data)
                http_chunks += int(end_of_http_chunk)
        seen = Seen(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=CIMultiDictProxy(CIMultiDict(request.headers)),
            body=bytes(body),
            chunked=request.headers.get("Transfer-Encoding", "").lower() == "chunked",
            http_chunks=http_chunks,
        )
        with self._lock:
            self.requests.append(seen)
            queue = self._queues.get((request.method, request.path))
            action = queue.popleft() if queue else None
        if action is None:
            return await problem(404, "RESOURCE_NOT_FOUND")(request)
        return await action(request)


def ws_path(*segments: str) -> str:
    return "/api/v1/workspaces/" + WS + "".join("/" + segment for segment in segments)


def account(account_id: str = "acc-1", version: int = 1) -> dict[str, Any]:
    return {
        "id": account_id,
        "workspaceId": WS,
        "name": f"account {account_id}",
        "providerId": "wepush.http",
        "config": {"baseUrl": "https://api.example.com"},
        "secrets": {},
        "createdAt": "2026-08-22T08:30:00Z",
        "updatedAt": "2026-08-22T08:30:00Z",
        "version": version,
    }


def run_accepted(run_id: str = "run-1") -> dict[str, Any]:
    return {
        "id": run_id,
        "state": "PENDING",
        "createdAt": "2026-08-22T08:30:00Z",
        "links": {"self": ws_path("runs", run_id), "events": ws_path("runs", run_id, "events")},
    }
