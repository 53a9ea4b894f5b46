"""Trace id propagation: accept or create ``X-Trace-Id`` and carry it through logs and the response."""

from __future__ import annotations

import re
import uuid
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wepush.server.infra.logging import bind_log_context

__all__ = ["TRACE_ID_HEADER", "TraceIdMiddleware"]

TRACE_ID_HEADER: Final = "x-trace-id"
# Inbound ids end up in every log line: anything outside this shape is replaced, never echoed.
_ACCEPTABLE_TRACE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def _inbound_trace_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == TRACE_ID_HEADER.encode("ascii"):
            text = value.decode("latin-1")
            return text if _ACCEPTABLE_TRACE_ID.fullmatch(text) else None
    return None


class TraceIdMiddleware:
    """Binds the request's trace id into the log context and ``scope["state"]["trace_id"]``.

    Install it outermost so that every other middleware's log lines and problem responses share the id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        trace_id = _inbound_trace_id(scope) or uuid.uuid4().hex
        scope.setdefault("state", {})["trace_id"] = trace_id

        async def send_with_trace_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[TRACE_ID_HEADER] = trace_id
            await send(message)

        with bind_log_context(trace_id=trace_id):
            await self.app(scope, receive, send_with_trace_id)
