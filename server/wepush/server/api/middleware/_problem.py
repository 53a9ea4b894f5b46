"""RFC 9457 problem responses sent directly by middleware (before any handler runs)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.types import Scope, Send

from wepush.server.infra.logging import current_trace_id

__all__ = ["PROBLEM_CONTENT_TYPE", "problem_body", "problem_type", "send_problem", "trace_id_for"]

PROBLEM_CONTENT_TYPE = "application/problem+json"
# The design's problem type base. ".example" is reserved (RFC 2606), so a type URI never names someone
# else's site; clients match on the stable ``code``.
_PROBLEM_TYPE_BASE = "https://wepush.example/errors/"


def problem_type(code: str) -> str:
    """The problem ``type`` URI of a stable code (``VERSION_CONFLICT`` → ``…/errors/version-conflict``)."""
    return _PROBLEM_TYPE_BASE + code.lower().replace("_", "-")


def trace_id_for(scope: Scope) -> str:
    """The request's trace id (set by TraceIdMiddleware), else the log context's, else a fresh one."""
    state: Any = scope.get("state")
    if isinstance(state, dict):
        trace_id = state.get("trace_id")
        if isinstance(trace_id, str):
            return trace_id
    return current_trace_id() or uuid.uuid4().hex


def problem_body(*, status: int, code: str, title: str, detail: str, trace_id: str) -> dict[str, object]:
    return {
        "type": problem_type(code),
        "title": title,
        "status": status,
        "code": code,
        "detail": detail,
        "traceId": trace_id,
        "errors": [],
    }


async def send_problem(send: Send, scope: Scope, *, status: int, code: str, title: str, detail: str) -> None:
    body = json.dumps(
        problem_body(status=status, code=code, title=title, detail=detail, trace_id=trace_id_for(scope)),
        separators=(",", ":"),
    ).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_CONTENT_TYPE.encode("ascii")),
                (b"content-length", str(len(body)).encode("ascii")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
