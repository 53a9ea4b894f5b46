"""Audiences, their CSV/TXT imports, snapshots and recipients: thin handlers.

The import upload declares no ``body`` parameter on purpose: Connexion then leaves the file (``text/csv``,
``text/plain`` or the other media types the contract lists) unread, and the handler streams it chunk by
chunk from the ASGI receive channel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from connexion import request
from connexion.lifecycle import ConnexionResponse
from starlette.responses import StreamingResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._paging import keyset_request, page_body, sequence_request
from wepush.server.api._problems import problem_response
from wepush.server.api._render_content import (
    error_csv,
    render_audience,
    render_import,
    render_import_preview,
    render_recipient,
    render_snapshot,
)
from wepush.server.api._responses import BreakableStreamingResponse, empty_response, json_response
from wepush.server.application._import_settings import ImportSettings
from wepush.server.application.imports import ErrorRowsIncomplete, ServiceStopping
from wepush.server.domain import ImportFormat, ImportState

_RESOURCE = "audiences"
_IMPORTS = "audience-imports"
_SNAPSHOTS = "audience-snapshots"
_RECIPIENTS = "audience-recipients"


def _base(workspace_id: str) -> str:
    return f"/api/v1/workspaces/{workspace_id}"


async def list_audiences(
    workspace_id: str, limit: int | None = None, cursor: str | None = None, name: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "name": name}
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.audiences.list(current_principal(), workspace_id, page, name=name)
    return json_response(page_body(found, render_audience, resource=_RESOURCE, filters=filters))


async def create_audience(workspace_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.audiences.create(
        principal,
        workspace_id,
        name=body["name"],
        description=body.get("description", ""),
        idempotency=idempotency_request("createAudience", principal, workspace_id, body),
        render=render_audience,
        trace_id=current_trace_id(),
    )
    headers = (
        {"Location": f"{_base(workspace_id)}/audiences/{outcome.resource_id}"} if outcome.resource_id else {}
    )
    return json_response(outcome.body, outcome.status, headers)


async def get_audience(workspace_id: str, audience_id: str) -> ConnexionResponse:
    audience = await services().resources.audiences.get(current_principal(), workspace_id, audience_id)
    return json_response(render_audience(audience))


async def update_audience(workspace_id: str, audience_id: str, body: dict[str, Any]) -> ConnexionResponse:
    audience = await services().resources.audiences.update(
        current_principal(),
        workspace_id,
        audience_id,
        name=body["name"],
        description=body.get("description", ""),
        version=body["version"],
        trace_id=current_trace_id(),
    )
    return json_response(render_audience(audience))


async def delete_audience(workspace_id: str, audience_id: str) -> ConnexionResponse:
    await services().resources.audiences.delete(
        current_principal(), workspace_id, audience_id, trace_id=current_trace_id()
    )
    return empty_response(204)


def _settings(body: dict[str, Any]) -> ImportSettings:
    format_ = ImportFormat(body["format"])
    return ImportSettings(
        format=format_,
        field_mapping=dict(body["fieldMapping"]),
        # A TXT file is a list of values; a CSV file names its columns, as spreadsheets write it.
        has_header=body.get("hasHeader", format_ is not ImportFormat.TXT),
        delimiter=body.get("delimiter", ","),
        encoding=body.get("encoding", "utf-8"),
        item_id_field=body.get("itemIdField"),
        dedupe_keys=tuple(body.get("dedupeKeys", ())),
        trim_whitespace=body.get("trimWhitespace", True),
    )


async def create_audience_import(
    workspace_id: str, audience_id: str, body: dict[str, Any]
) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.imports.create(
        principal,
        workspace_id,
        audience_id,
        _settings(body),
        idempotency=idempotency_request("createAudienceImport", principal, workspace_id, body),
        render=render_import,
        trace_id=current_trace_id(),
    )
    location = f"{_base(workspace_id)}/audiences/{audience_id}/imports/{outcome.resource_id}"
    return json_response(outcome.body, outcome.status, {"Location": location} if outcome.resource_id else {})


async def list_audience_imports(
    workspace_id: str,
    audience_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    state: list[str] | None = None,
) -> ConnexionResponse:
    states = sorted(set(state or []))
    filters = {"workspaceId": workspace_id, "audienceId": audience_id, "state": states}
    page = keyset_request(_IMPORTS, filters, limit, cursor)
    found = await services().resources.imports.list_page(
        current_principal(),
        workspace_id,
        audience_id,
        page,
        states=[ImportState(s) for s in states] if states else None,
    )
    return json_response(page_body(found, render_import, resource=_IMPORTS, filters=filters))


async def get_audience_import(workspace_id: str, audience_id: str, import_id: str) -> ConnexionResponse:
    found = await services().resources.imports.get(current_principal(), workspace_id, audience_id, import_id)
    return json_response(render_import(found))


async def _body_chunks() -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


def _declared_length(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _content_codings() -> str | None:
    """Every ``Content-Encoding`` line of the request as one list: RFC 9110 §5.3 makes several lines of
    a list header mean the same as one comma-joined line, so a second coding on a line of its own must
    be refused as well as one after a comma, not ignored."""
    lines = request.headers.getlist("content-encoding")
    return ", ".join(lines) if lines else None


async def upload_audience_import_content(
    workspace_id: str, audience_id: str, import_id: str
) -> ConnexionResponse:
    try:
        staged = await services().resources.imports.upload(
            current_principal(),
            workspace_id,
            audience_id,
            import_id,
            _body_chunks(),
            content_encoding=_content_codings(),
            content_type=request.headers.get("content-type"),
            content_length=_declared_length(request.headers.get("content-length")),
            trace_id=current_trace_id(),
        )
    except ServiceStopping as stopping:
        # Answered here rather than by the generic handler, which logs every 5xx with its traceback: an
        # orderly stop is no error, and the use case already logged the upload it ended.
        return problem_response(
            stopping.code,
            str(stopping),
            status=stopping.status,
            trace_id=current_trace_id(),
            headers={"Retry-After": str(stopping.retry_after_seconds)},
        )
    return json_response(render_import(staged))


async def get_audience_import_preview(
    workspace_id: str, audience_id: str, import_id: str
) -> ConnexionResponse:
    preview = await services().resources.imports.preview(
        current_principal(), workspace_id, audience_id, import_id
    )
    return json_response(render_import_preview(preview))


async def download_audience_import_errors(
    workspace_id: str, audience_id: str, import_id: str
) -> StreamingResponse:
    pages = await services().resources.imports.error_rows(
        current_principal(), workspace_id, audience_id, import_id, trace_id=current_trace_id()
    )
    return BreakableStreamingResponse(
        error_csv(pages),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="import-{import_id}-errors.csv"'},
        breaks_on=(ErrorRowsIncomplete,),
    )


async def commit_audience_import(
    workspace_id: str, audience_id: str, import_id: str, body: dict[str, Any]
) -> ConnexionResponse:
    principal = current_principal()
    outcome = await services().resources.imports.commit(
        principal,
        workspace_id,
        audience_id,
        import_id,
        body["version"],
        idempotency=idempotency_request("commitAudienceImport", principal, workspace_id, body),
        render=render_snapshot,
        trace_id=current_trace_id(),
    )
    location = f"{_base(workspace_id)}/audience-snapshots/{outcome.resource_id}"
    return json_response(outcome.body, outcome.status, {"Location": location} if outcome.resource_id else {})


async def discard_audience_import(workspace_id: str, audience_id: str, import_id: str) -> ConnexionResponse:
    discarded = await services().resources.imports.discard(
        current_principal(), workspace_id, audience_id, import_id, trace_id=current_trace_id()
    )
    return json_response(render_import(discarded))


async def list_audience_snapshots(
    workspace_id: str, audience_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "audienceId": audience_id}
    page = sequence_request(_SNAPSHOTS, filters, limit, cursor)
    found = await services().resources.audiences.list_snapshots(
        current_principal(), workspace_id, audience_id, page
    )
    return json_response(page_body(found, render_snapshot, resource=_SNAPSHOTS, filters=filters))


async def get_audience_snapshot(workspace_id: str, snapshot_id: str) -> ConnexionResponse:
    snapshot = await services().resources.audiences.get_snapshot(
        current_principal(), workspace_id, snapshot_id
    )
    return json_response(render_snapshot(snapshot))


async def list_audience_snapshot_recipients(
    workspace_id: str, snapshot_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"workspaceId": workspace_id, "snapshotId": snapshot_id}
    page = sequence_request(_RECIPIENTS, filters, limit, cursor)
    found = await services().resources.audiences.list_recipients(
        current_principal(), workspace_id, snapshot_id, page
    )
    return json_response(page_body(found, render_recipient, resource=_RECIPIENTS, filters=filters))
