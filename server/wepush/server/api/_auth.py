"""The authenticated caller of the current request, as established by the security handlers."""

from __future__ import annotations

from typing import Any

from connexion.context import context, request

from wepush.server.application.auth import Principal
from wepush.server.application.errors import AccessDenied

PRINCIPAL_KEY = "principal"


def current_principal() -> Principal:
    token_info: Any = context.get("token_info") if hasattr(context, "get") else None
    principal = token_info.get(PRINCIPAL_KEY) if isinstance(token_info, dict) else None
    if not isinstance(principal, Principal):
        raise AccessDenied("No authenticated principal for this operation.")
    return principal


def current_trace_id() -> str | None:
    """The id the trace middleware bound to this request (it validates or generates it)."""
    state = request.scope.get("state") or {}
    value = state.get("trace_id") if isinstance(state, dict) else None
    return value if isinstance(value, str) else None


def header(name: str) -> str | None:
    value = request.headers.get(name)
    return value if value else None
