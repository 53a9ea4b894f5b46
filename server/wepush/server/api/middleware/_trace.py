"""Trace id propagation: accept or create ``X-Trace-Id`` and carry it through logs and the response.

The same middleware binds the ids a request path names (``/api/v1/workspaces/{workspaceId}``, ``.../runs/
{runId}``, ``/internal/agent/v1/leases/{leaseId}``) into the log context, so every line the request logs
says which workspace, run or lease it was about.
"""

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
# Path segments are client input too: only id-shaped ones (the contract's Id: at most 64 characters) are
# bound, anything else is left out of the log context rather than echoed.
_ACCEPTABLE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_WORKSPACE_PATH: Final = re.compile(
    r"/api/v1/workspaces/(?P<workspace>[^/]+)(?:/runs/(?P<run>[^/]+))?(?:/|$)"
)
_LEASE_PATH: Final = re.compile(r"/internal/agent/v1/leases/(?P<lease>[^/]+)(?:/|$)")


def _inbound_trace_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == TRACE_ID_HEADER.encode("ascii"):
            text = value.decode("latin-1")
            return text if _ACCEPTABLE_TRACE_ID.fullmatch(text) else None
    return None


def _id_or_none(value: str | None) -> str | None:
    return value if value is not None and _ACCEPTABLE_ID.fullmatch(value) else None


def _path_ids(path: str) -> dict[str, str | None]:
    """The workspace, run and lease ids the request path names, each only if it is shaped like an id."""
    found: dict[str, str | None] = {}
    workspace = _WORKSPACE_PATH.match(path)
    if workspace is not None:
        found["workspace_id"] = _id_or_none(workspace.group("workspace"))
        found["run_id"] = _id_or_none(workspace.group("run"))
    lease = _LEASE_PATH.match(path)
    if lease is not None:
        found["lease_id"] = _id_or_none(lease.group("lease"))
    return found


class TraceIdMiddleware:
    """Binds the request's trace id into the log context and ``scope["state"]["trace_id"]``, and the ids its
    path names into the log context.

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

        ids = _path_ids(scope.get("path", ""))
        with bind_log_context(
            trace_id=trace_id,
            workspace_id=ids.get("workspace_id"),
            run_id=ids.get("run_id"),
            lease_id=ids.get("lease_id"),
        ):
            await self.app(scope, receive, send_with_trace_id)
