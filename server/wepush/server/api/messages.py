"""Messages and their immutable revisions: thin handlers."""

from __future__ import annotations

from typing import Any

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._paging import keyset_request, page_body, sequence_request
from wepush.server.api._render_content import render_message, render_revision
from wepush.server.api._responses import empty_response, json_response

_RESOURCE = "messages"
_REVISIONS = "message-revisions"


def _base(workspace_id: str) -> str:
    return f"/api/v1/workspaces/{workspace_id}/messages"


async def list_messages(
    workspace_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    provider_id: str | None = None,
    name: str | None = None,
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "providerId": provider_id, "name": name}
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.messages.list(
        current_principal(), workspace_id, page, name=name, provider_id=provider_id
    )
    return json_response(page_body(found, render_message, resource=_RESOURCE, filters=filters))


async def create_message(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.messages.create(
        principal,
        workspace_id,
        name=body["name"],
        description=body.get("description", ""),
        provider_id=body["providerId"],
        content=dict(body["content"]),
        idempotency=idempotency_request("createMessage", principal, workspace_id, body),
        render=render_message,
        trace_id=current_trace_id(),
    )
    headers = {"Location": f"{_base(workspace_id)}/{outcome.resource_id}"} if outcome.resource_id else {}
    return json_response(outcome.body, outcome.status, headers)


async def get_message(workspace_id: str, message_id: str) -> ConnexionResponse:
    message = await services().resources.messages.get(current_principal(), workspace_id, message_id)
    return json_response(render_message(message))


async def update_message(workspace_id: str, message_id: str, body: dict[str, Any]) -> ConnexionResponse:
    message = await services().resources.messages.update(
        current_principal(),
        workspace_id,
        message_id,
        name=body["name"],
        description=body.get("description", ""),
        version=body["version"],
        trace_id=current_trace_id(),
    )
    return json_response(render_message(message))


async def delete_message(workspace_id: str, message_id: str) -> ConnexionResponse:
    await services().resources.messages.delete(
        current_principal(), workspace_id, message_id, trace_id=current_trace_id()
    )
    return empty_response(204)


async def list_message_revisions(
    workspace_id: str, message_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "messageId": message_id}
    page = sequence_request(_REVISIONS, filters, limit, cursor)
    found = await services().resources.messages.list_revisions(
        current_principal(), workspace_id, message_id, page
    )
    return json_response(page_body(found, render_revision, resource=_REVISIONS, filters=filters))


async def create_message_revision(
    workspace_id: str, message_id: str, body: dict[str, Any]
) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.messages.create_revision(
        principal,
        workspace_id,
        message_id,
        content=dict(body["content"]),
        based_on_revision=body["basedOnRevision"],
        idempotency=idempotency_request("createMessageRevision", principal, workspace_id, body),
        render=render_revision,
        trace_id=current_trace_id(),
    )
    revision = outcome.body.get("revision")
    created = revision and outcome.status == 201
    headers = {"Location": f"{_base(workspace_id)}/{message_id}/revisions/{revision}"} if created else {}
    return json_response(outcome.body, outcome.status, headers)


async def get_message_revision(workspace_id: str, message_id: str, revision: int) -> ConnexionResponse:
    found = await services().resources.messages.get_revision(
        current_principal(), workspace_id, message_id, revision
    )
    return json_response(render_revision(found))
