"""Jobs: thin handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_content import render_job
from wepush.server.api._responses import empty_response, json_response
from wepush.server.application.jobs import JobDefinition

_RESOURCE = "jobs"


def _definition(body: Mapping[str, Any]) -> JobDefinition:
    return JobDefinition(
        name=body["name"],
        description=body.get("description", ""),
        account_id=body["accountId"],
        message_id=body["messageId"],
        message_revision=body["messageRevision"],
        audience_snapshot_id=body["audienceSnapshotId"],
        policies=body.get("policies"),
    )


async def list_jobs(
    workspace_id: str, limit: int | None = None, cursor: str | None = None, name: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "name": name}
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.jobs.list(current_principal(), workspace_id, page, name=name)
    return json_response(page_body(found, render_job, resource=_RESOURCE, filters=filters))


async def create_job(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.jobs.create(
        principal,
        workspace_id,
        _definition(body),
        idempotency=idempotency_request("createJob", principal, workspace_id, body),
        render=render_job,
        trace_id=current_trace_id(),
    )
    location = f"/api/v1/workspaces/{workspace_id}/jobs/{outcome.resource_id}"
    return json_response(outcome.body, outcome.status, {"Location": location} if outcome.resource_id else {})


async def get_job(workspace_id: str, job_id: str) -> ConnexionResponse:
    view = await services().resources.jobs.get(current_principal(), workspace_id, job_id)
    return json_response(render_job(view))


async def update_job(workspace_id: str, job_id: str, body: dict[str, Any]) -> ConnexionResponse:
    view = await services().resources.jobs.update(
        current_principal(),
        workspace_id,
        job_id,
        _definition(body),
        version=body["version"],
        trace_id=current_trace_id(),
    )
    return json_response(render_job(view))


async def delete_job(workspace_id: str, job_id: str) -> ConnexionResponse:
    await services().resources.jobs.delete(
        current_principal(), workspace_id, job_id, trace_id=current_trace_id()
    )
    return empty_response(204)
