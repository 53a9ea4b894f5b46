"""A local stand-in for a channel vendor's HTTP API, for protocol tests.

``VendorServer`` is a real aiohttp server bound to 127.0.0.1 on an ephemeral
port. Tests script its answers per path (or with a responder function) and read
back exactly what the provider sent. It never listens on anything but loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType

from aiohttp import web

__all__ = ["RecordedRequest", "ScriptedResponse", "VendorServer"]


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """What the vendor answers. ``json`` wins over ``body`` when both are given.

    ``delay_seconds`` holds the answer back (to provoke client timeouts); the
    wait ends early when the server stops so shutdown never hangs.
    """

    status: int = 200
    body: bytes = b""
    json: object = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0

    def payload(self) -> tuple[bytes, str | None]:
        if self.json is not None:
            return json.dumps(self.json).encode("utf-8"), "application/json"
        return self.body, None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request exactly as the vendor received it."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body.decode("utf-8"))


Responder = Callable[[RecordedRequest], "ScriptedResponse | Awaitable[ScriptedResponse]"]

_ANY_PATH = "*"


class VendorServer:
    """Scripted HTTP server on loopback. Use as ``async with VendorServer() as vendor``.

    Answer order for a request: the next response queued for its path, then the
    next queued for any path (``"*"``), then the responder, then ``default``.
    """

    def __init__(
        self,
        *,
        default: ScriptedResponse | None = None,
        record: bool = True,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._default = default if default is not None else ScriptedResponse(200, json={"success": True})
        self._record = record
        self._port = port
        self._ssl = ssl_context
        self._queues: dict[str, deque[ScriptedResponse]] = {}
        self._responder: Responder | None = None
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._arrived = asyncio.Condition()
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self.port = 0

    @property
    def base_url(self) -> str:
        if self._runner is None:
            raise RuntimeError("VendorServer is not started")
        return f"{'https' if self._ssl is not None else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def enqueue(self, path: str, *responses: ScriptedResponse) -> None:
        """Queue answers for ``path`` (``"*"`` for any path), consumed in order."""
        self._queues.setdefault(path, deque()).extend(responses)

    async def wait_for_requests(self, count: int) -> None:
        """Return once ``count`` requests have arrived (bound it with the test's own timeout)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: self.request_count >= count)

    def respond_with(self, responder: Responder | None) -> None:
        """Compute answers from the request when nothing is queued for it."""
        self._responder = responder

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port, ssl_context=self._ssl)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._closing.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> VendorServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _next_response(self, recorded: RecordedRequest) -> ScriptedResponse:
        for key in (recorded.path, _ANY_PATH):
            queue = self._queues.get(key)
            if queue:
                return queue.popleft()
        if self._responder is not None:
            answer = self._responder(recorded)
            if isinstance(answer, ScriptedResponse):
                return answer
            return await answer
        return self._default

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            query=MappingProxyType(dict(request.query)),
            headers=MappingProxyType(dict(request.headers)),
            body=body,
        )
        self.request_count += 1
        if self._record:
            self.requests.append(recorded)
        async with self._arrived:
            self._arrived.notify_all()
        scripted = await self._next_response(recorded)
        if scripted.delay_seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), scripted.delay_seconds)
        payload, content_type = scripted.payload()
        response = web.Response(status=scripted.status, body=payload, headers=dict(scripted.headers))
        if content_type is not None and "Content-Type" not in scripted.headers:
            response.content_type = content_type
        return response
