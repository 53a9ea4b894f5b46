"""Reads the Idempotency-Key header of a creating POST into the application's idempotency request."""

from __future__ import annotations

from typing import Any

from connexion.context import request

from wepush.server.application.auth import Principal
from wepush.server.application.idempotency import (
    IdempotencyKeyInvalid,
    request_fingerprint,
    validate_idempotency_key,
)
from wepush.server.application.idempotent import IdempotencyRequest


def idempotency_request(
    operation: str, principal: Principal, workspace_id: str | None, body: Any
) -> IdempotencyRequest | None:
    sent = request.headers.getlist("idempotency-key")
    if not sent:
        return None
    if len(sent) > 1:
        # Which one a retry would repeat is anyone's guess: refuse rather than pick.
        raise IdempotencyKeyInvalid("Idempotency-Key: send the header once")
    key = validate_idempotency_key(sent[0])
    # The scope ties the key to its operation, workspace and caller: the same key elsewhere is unrelated.
    scope = f"{operation}:{workspace_id or '-'}:{principal.id}"
    return IdempotencyRequest(
        scope=scope,
        key=key,
        fingerprint=request_fingerprint(request.method, request.url.path, body),
    )
