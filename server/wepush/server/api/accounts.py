"""Provider accounts: thin handlers. Secret values only ever travel inwards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connexion.lifecycle import ConnexionResponse

from wepush.agent.engine import parse_duration
from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_core import render_account, render_connection_test
from wepush.server.api._responses import empty_response, json_response
from wepush.server.application.accounts import AccountDraft, SecretKeep, SecretReplace, SecretWrite
from wepush.server.application.errors import FieldIssue, ValidationFailed

_RESOURCE = "accounts"


def _secret_writes(raw: Mapping[str, Any] | None) -> dict[str, SecretWrite]:
    writes: dict[str, SecretWrite] = {}
    for name, write in (raw or {}).items():
        writes[name] = SecretKeep() if write["operation"] == "KEEP" else SecretReplace(write["value"])
    return writes


def _draft(body: Mapping[str, Any]) -> AccountDraft:
    return AccountDraft(
        name=body["name"],
        description=body.get("description", ""),
        config=dict(body["config"]),
        secrets=_secret_writes(body.get("secrets")),
    )


async def list_accounts(
    workspace_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    provider_id: str | None = None,
    name: str | None = None,
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "providerId": provider_id, "name": name}
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.accounts.list_page(
        current_principal(), workspace_id, page, provider_id=provider_id, name=name
    )
    return json_response(page_body(found, render_account, resource=_RESOURCE, filters=filters))


async def create_account(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    accounts = services().resources.accounts
    outcome = await accounts.create(
        principal,
        workspace_id,
        body["providerId"],
        _draft(body),
        idempotency=idempotency_request(
            "createAccount", principal, workspace_id, accounts.idempotency_body(body)
        ),
        render=render_account,
        trace_id=current_trace_id(),
    )
    location = f"/api/v1/workspaces/{workspace_id}/accounts/{outcome.resource_id}"
    return json_response(outcome.body, outcome.status, {"Location": location} if outcome.resource_id else {})


async def get_account(workspace_id: str, account_id: str) -> ConnexionResponse:
    view = await services().resources.accounts.get(current_principal(), workspace_id, account_id)
    return json_response(render_account(view))


async def update_account(workspace_id: str, account_id: str, body: dict[str, Any]) -> ConnexionResponse:
    view = await services().resources.accounts.update(
        current_principal(),
        workspace_id,
        account_id,
        _draft(body),
        version=body["version"],
        trace_id=current_trace_id(),
    )
    return json_response(render_account(view))


async def delete_account(workspace_id: str, account_id: str) -> ConnexionResponse:
    await services().resources.accounts.delete(
        current_principal(), workspace_id, account_id, trace_id=current_trace_id()
    )
    return empty_response(204)


# Named by the operationId testAccountConnection: a Connexion handler, not a pytest test.
async def test_account_connection(
    workspace_id: str,
    account_id: str,
    body: Any = None,  # noqa: PT028 - the request body is optional
) -> ConnexionResponse:
    # Without a body Connexion hands over empty bytes, not the schema's default object.
    raw = body.get("timeout") if isinstance(body, dict) else None
    timeout = None
    if raw is not None:
        try:
            timeout = parse_duration(raw)
        except (ValueError, OverflowError):
            raise ValidationFailed(
                "The timeout is not a duration.",
                [FieldIssue("/timeout", "INVALID_FORMAT", "must be an ISO-8601 duration such as PT5S")],
            ) from None
    outcome = await services().resources.accounts.test_connection(
        current_principal(), workspace_id, account_id, timeout=timeout, trace_id=current_trace_id()
    )
    return json_response(render_connection_test(outcome))
