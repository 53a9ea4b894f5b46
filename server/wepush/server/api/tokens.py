"""Workspace API tokens: the plaintext appears in the creation response only."""

from __future__ import annotations

from typing import Any

from connexion import request
from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._instants import read_instant
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_core import render_api_token_created, render_listed_token
from wepush.server.api._responses import empty_response, json_response
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.domain import WorkspaceRole

_RESOURCE = "api-tokens"


async def list_api_tokens(
    workspace_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id}
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.tokens.list_page(current_principal(), workspace_id, page)
    return json_response(page_body(found, render_listed_token, resource=_RESOURCE, filters=filters))


async def create_api_token(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    if "idempotency-key" in request.headers:
        # A replay would have to hand out the plaintext again, which is never kept; ignoring the key
        # instead would let a client believe a retry is safe and mint a second token.
        raise ValidationFailed(
            "Creating an API token takes no Idempotency-Key.",
            [
                FieldIssue(
                    "Idempotency-Key",
                    "NOT_ACCEPTED",
                    "a token is shown once and never kept, so its creation cannot be replayed; "
                    "send the request without the header, and list the tokens to see whether a retry is needed",
                )
            ],
        )
    expires_at = read_instant("/expiresAt", body.get("expiresAt"))
    issued = await services().resources.tokens.create(
        current_principal(),
        workspace_id,
        name=body["name"],
        role=WorkspaceRole(body["role"]),
        expires_at=expires_at,
        trace_id=current_trace_id(),
    )
    location = f"/api/v1/workspaces/{workspace_id}/api-tokens/{issued.token.id}"
    # The plaintext must not linger in shared caches either.
    headers = {"Location": location, "Cache-Control": "no-store"}
    return json_response(render_api_token_created(issued), 201, headers)


async def revoke_api_token(workspace_id: str, token_id: str) -> ConnexionResponse:
    await services().resources.tokens.revoke(
        current_principal(), workspace_id, token_id, trace_id=current_trace_id()
    )
    return empty_response(204)
