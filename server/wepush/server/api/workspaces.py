"""Workspaces and members: thin handlers that translate between the contract and the use cases."""

from __future__ import annotations

from typing import Any

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_core import render_member, render_workspace
from wepush.server.api._responses import empty_response, json_response
from wepush.server.domain import WorkspaceRole


async def list_workspaces(
    limit: int | None = None, cursor: str | None = None, name: str | None = None
) -> ConnexionResponse:
    filters = {"name": name}
    page = keyset_request("workspaces", filters, limit, cursor)
    found = await services().resources.workspaces.list_page(
        current_principal(), page, name=name, trace_id=current_trace_id()
    )
    return json_response(page_body(found, render_workspace, resource="workspaces", filters=filters))


async def create_workspace(body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.workspaces.create(
        principal,
        name=body["name"],
        description=body.get("description", ""),
        idempotency=idempotency_request("createWorkspace", principal, None, body),
        render=render_workspace,
        trace_id=current_trace_id(),
    )
    headers = {"Location": f"/api/v1/workspaces/{outcome.resource_id}"} if outcome.resource_id else {}
    return json_response(outcome.body, outcome.status, headers)


async def get_workspace(workspace_id: str) -> ConnexionResponse:
    workspace = await services().resources.workspaces.get(current_principal(), workspace_id)
    return json_response(render_workspace(workspace))


async def update_workspace(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    workspace = await services().resources.workspaces.update(
        current_principal(),
        workspace_id,
        name=body["name"],
        description=body.get("description", ""),
        version=body["version"],
        trace_id=current_trace_id(),
    )
    return json_response(render_workspace(workspace))


async def list_workspace_members(
    workspace_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id}
    page = keyset_request("workspace-members", filters, limit, cursor)
    found = await services().resources.workspaces.list_members(current_principal(), workspace_id, page)
    return json_response(page_body(found, render_member, resource="workspace-members", filters=filters))


async def put_workspace_member_role(
    workspace_id: str, user_id: str, body: dict[str, Any]
) -> ConnexionResponse:
    member = await services().resources.workspaces.put_member_role(
        current_principal(),
        workspace_id,
        user_id,
        WorkspaceRole(body["role"]),
        trace_id=current_trace_id(),
    )
    return json_response(render_member(member))


async def delete_workspace_member(workspace_id: str, user_id: str) -> ConnexionResponse:
    await services().resources.workspaces.remove_member(
        current_principal(), workspace_id, user_id, trace_id=current_trace_id()
    )
    return empty_response(204)
