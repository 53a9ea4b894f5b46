"""Reads the Idempotency-Key header of a creating POST into the application's idempotency request."""

from __future__ import annotations

from typing import Any

from connexion.context import request

from wepush.server.application.auth import Principal
from wepush.server.application.idempotency import request_fingerprint, validate_idempotency_key
from wepush.server.application.idempotent import IdempotencyRequest


def idempotency_request(
    operation: str, principal: Principal, workspace_id: str | None, body: Any
) -> IdempotencyRequest | None:
    raw = request.headers.get("idempotency-key")
    if raw is None:
        return None
    key = validate_idempotency_key(raw)
    # The scope ties the key to its operation, workspace and caller: the same key elsewhere is unrelated.
    scope = f"{operation}:{workspace_id or '-'}:{principal.id}"
    return IdempotencyRequest(
        scope=scope,
        key=key,
        fingerprint=request_fingerprint(request.method, request.url.path, body),
    )
