"""Runs: thin handlers for confirmation, start, detail, items, commands, events, artifacts and resend."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from connexion.lifecycle import ConnexionResponse
from starlette.responses import Response, StreamingResponse

from wepush.server.api._auth import current_principal, current_trace_id, header
from wepush.server.api._context import services
from wepush.server.api._idempotency import idempotency_request
from wepush.server.api._instants import read_instant
from wepush.server.api._paging import keyset_request, page_body, sequence_request
from wepush.server.api._problems import problem_response
from wepush.server.api._render_runs import (
    CONTRACT_ARTIFACT_TYPES,
    render_artifact,
    render_command,
    render_command_accepted,
    render_event,
    render_item,
    render_resend_confirmation,
    render_run,
    render_run_accepted,
    render_run_confirmation,
)
from wepush.server.api._responses import BreakableStreamingResponse, empty_response, json_response
from wepush.server.api._sse import CredentialCheck, sse_response
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.runs import (
    CommandRequest,
    RangeNotSatisfiable,
    RunService,
    RunStartRequest,
)
from wepush.server.domain import ArtifactStoreUnreachable, ItemState, PageRequest, RunCommandType

_RUNS = "runs"
_ITEMS = "run-items"
_EVENTS = "run-events"
_ARTIFACTS = "run-artifacts"


def _runs() -> RunService:
    return services().resources.runs


def _optional(body: Any) -> dict[str, Any]:
    """An optional JSON body: Connexion hands over raw (empty) bytes when the client sent none."""
    return body if isinstance(body, dict) else {}


def _accepted(outcome_body: Mapping[str, Any]) -> ConnexionResponse:
    links = outcome_body.get("links")
    headers = {"Location": str(links["self"])} if isinstance(links, Mapping) and "self" in links else None
    return json_response(dict(outcome_body), 202, headers)


# --- creation -----------------------------------------------------------------------------------------


async def create_run_confirmation(
    workspace_id: str, job_id: str, body: dict[str, Any] | bytes | None = None
) -> ConnexionResponse:
    body = _optional(body)
    view = await _runs().confirm_run(
        current_principal(),
        workspace_id,
        job_id,
        dry_run=bool(body.get("dryRun", False)),
        policy_overrides=body.get("policyOverrides"),
    )
    return json_response(render_run_confirmation(view))


async def start_run(workspace_id: str, job_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    request = RunStartRequest(
        dry_run=bool(body.get("dryRun", False)),
        policy_overrides=body.get("policyOverrides"),
        reason=body.get("reason"),
        confirmation_token=body.get("confirmationToken"),
    )
    outcome = await _runs().start_run(
        principal,
        workspace_id,
        job_id,
        request,
        idempotency=idempotency_request("startRun", principal, workspace_id, body),
        render=render_run_accepted,
        trace_id=current_trace_id(),
    )
    return _accepted(outcome.body)


async def create_resend_confirmation(
    workspace_id: str, run_id: str, body: dict[str, Any]
) -> ConnexionResponse:
    view = await _runs().confirm_resend(current_principal(), workspace_id, run_id, body["outcomes"])
    return json_response(render_resend_confirmation(view))


async def resend_run(workspace_id: str, run_id: str, body: dict[str, Any]) -> ConnexionResponse:
    principal = current_principal()
    outcome = await _runs().resend(
        principal,
        workspace_id,
        run_id,
        body["outcomes"],
        body["confirmationToken"],
        reason=body.get("reason"),
        idempotency=idempotency_request("resendRun", principal, workspace_id, body),
        render=render_run_accepted,
        trace_id=current_trace_id(),
    )
    return _accepted(outcome.body)


# --- reading ------------------------------------------------------------------------------------------


async def list_runs(
    workspace_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    state: list[str] | None = None,
    job_id: str | None = None,
    created_after: str | None = None,
    created_before: str | None = None,
) -> ConnexionResponse:
    after = read_instant("createdAfter", created_after)
    before = read_instant("createdBefore", created_before)
    filters = {
        "workspaceId": workspace_id,
        "state": sorted(set(state or [])),
        "jobId": job_id,
        "createdAfter": after,
        "createdBefore": before,
    }
    page = keyset_request(_RUNS, filters, limit, cursor)
    found = await _runs().list_runs(
        current_principal(), workspace_id, page, RunService.list_filter(state, job_id, after, before)
    )
    return json_response(page_body(found, render_run, resource=_RUNS, filters=filters))


async def get_run(workspace_id: str, run_id: str) -> ConnexionResponse:
    return json_response(render_run(await _runs().get_run(current_principal(), workspace_id, run_id)))


async def list_run_items(
    workspace_id: str,
    run_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    state: list[str] | None = None,
) -> ConnexionResponse:
    filters = {"runId": run_id, "state": sorted(set(state or []))}
    page = sequence_request(_ITEMS, filters, limit, cursor)
    states = [ItemState(s) for s in state] if state else None
    found = await _runs().list_items(current_principal(), workspace_id, run_id, page, states)
    return json_response(page_body(found, render_item, resource=_ITEMS, filters=filters))


# --- commands -----------------------------------------------------------------------------------------


async def _command(
    workspace_id: str, run_id: str, request: CommandRequest, operation: str
) -> ConnexionResponse:
    principal = current_principal()
    body = {"type": request.type.value, "reason": request.reason, "target": request.target}
    outcome = await _runs().submit_command(
        principal,
        workspace_id,
        run_id,
        request,
        idempotency=idempotency_request(operation, principal, workspace_id, body),
        render=render_command_accepted,
        trace_id=current_trace_id(),
    )
    return json_response(outcome.body, 202)


async def pause_run(workspace_id: str, run_id: str) -> ConnexionResponse:
    return await _command(workspace_id, run_id, CommandRequest(RunCommandType.PAUSE), "pauseRun")


async def resume_run(workspace_id: str, run_id: str) -> ConnexionResponse:
    return await _command(workspace_id, run_id, CommandRequest(RunCommandType.RESUME), "resumeRun")


async def cancel_run(
    workspace_id: str, run_id: str, body: dict[str, Any] | bytes | None = None
) -> ConnexionResponse:
    request = CommandRequest(RunCommandType.CANCEL, reason=_optional(body).get("reason"))
    return await _command(workspace_id, run_id, request, "cancelRun")


async def change_run_concurrency(workspace_id: str, run_id: str, body: dict[str, Any]) -> ConnexionResponse:
    request = CommandRequest(RunCommandType.CHANGE_CONCURRENCY, target=int(body["target"]))
    return await _command(workspace_id, run_id, request, "changeRunConcurrency")


async def get_run_command(workspace_id: str, run_id: str, command_id: str) -> ConnexionResponse:
    command = await _runs().get_command(current_principal(), workspace_id, run_id, command_id)
    return json_response(render_command(command))


# --- events -------------------------------------------------------------------------------------------


_SEQUENCE: Final = re.compile(r"[0-9]{1,19}")
_MAX_SEQUENCE: Final = 2**63 - 1


def _last_event_id() -> int | None:
    raw = header("Last-Event-ID")
    if raw is None:
        return None
    text = raw.strip()
    # ASCII digits only (str.isdigit also accepts "²"), and within the 64-bit sequence column.
    if not _SEQUENCE.fullmatch(text) or int(text) > _MAX_SEQUENCE:
        raise ValidationFailed(
            "Last-Event-ID must be an event sequence.",
            [FieldIssue("Last-Event-ID", "INVALID", f"must be an integer from 0 to {_MAX_SEQUENCE}")],
        )
    return int(text)


async def stream_run_events(
    workspace_id: str, run_id: str, after_sequence: int | None = None
) -> StreamingResponse | ConnexionResponse:
    # A reconnecting browser sends Last-Event-ID; it wins over the query parameter of the first URL.
    last = _last_event_id()
    after = last if last is not None else (after_sequence or 0)
    runs = _runs()
    subscription = await runs.open_event_stream(current_principal(), workspace_id, run_id, after)
    if subscription is None:
        # The run ended and its last event was already sent: 204 is how an event stream says "stop
        # reconnecting" (WHATWG HTML, server-sent events).
        return empty_response(204)
    return sse_response(subscription, runs.heartbeat_seconds, render_event, _credential_check())


def _credential_check() -> CredentialCheck:
    """Authenticates the request's bearer token again (the security handler has accepted it once)."""
    authorization = header("Authorization") or ""
    token = authorization.partition(" ")[2].strip()
    auth = services().auth

    async def still_valid() -> bool:
        return await auth.authenticate_api_token(token) is not None

    return still_valid


async def list_run_events(
    workspace_id: str,
    run_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    after_sequence: int | None = None,
) -> ConnexionResponse:
    filters = {"runId": run_id, "afterSequence": after_sequence}
    page = sequence_request(_EVENTS, filters, limit, cursor)
    if page.after is None and after_sequence:
        page = PageRequest(limit=page.limit, after=after_sequence)
    found = await _runs().list_events(current_principal(), workspace_id, run_id, page)
    return json_response(page_body(found, render_event, resource=_EVENTS, filters=filters))


# --- artifacts ----------------------------------------------------------------------------------------


async def list_run_artifacts(
    workspace_id: str, run_id: str, limit: int | None = None, cursor: str | None = None
) -> ConnexionResponse:
    filters = {"runId": run_id}
    page = keyset_request(_ARTIFACTS, filters, limit, cursor)
    # Only the types the contract names can be rendered; the repository skips the rest before reading the
    # page, so a page is never short of its limit while more artifacts remain.
    found = await _runs().list_artifacts(
        current_principal(), workspace_id, run_id, page, artifact_types=CONTRACT_ARTIFACT_TYPES
    )
    return json_response(page_body(found, render_artifact, resource=_ARTIFACTS, filters=filters))


_DOWNLOAD_TYPES = ("application/x-ndjson", "text/csv", "application/octet-stream")


def _download_media_type(content_type: str) -> str:
    """The artifact's own media type when the contract lists it, else a neutral octet-stream."""
    mime = content_type.split(";", 1)[0].strip().lower()
    return content_type if mime in _DOWNLOAD_TYPES else "application/octet-stream"


def _content_disposition(file_name: str) -> str:
    safe = "".join(ch if ch.isascii() and ch.isprintable() and ch not in '"\\/' else "_" for ch in file_name)
    return f"attachment; filename=\"{safe or 'artifact'}\"; filename*=UTF-8''{quote(file_name, safe='')}"


async def download_run_artifact(
    workspace_id: str, run_id: str, artifact_id: str
) -> Response | ConnexionResponse:
    try:
        download = await _runs().download_artifact(
            current_principal(),
            workspace_id,
            run_id,
            artifact_id,
            header("Range"),
            trace_id=current_trace_id(),
        )
    except RangeNotSatisfiable as refused:
        # The problem body alone cannot carry the header RFC 9110 asks for: the full size.
        return problem_response(
            refused.code,
            str(refused),
            status=416,
            trace_id=current_trace_id(),
            headers={"Content-Range": f"bytes */{refused.size}"},
        )
    except ArtifactStoreUnreachable as unreachable:
        # Answered here rather than by the generic handler, which logs every 5xx with its traceback: the
        # store already logged one line saying why, and nothing went wrong in the Service itself.
        return problem_response(
            unreachable.code,
            str(unreachable),
            status=503,
            trace_id=current_trace_id(),
            headers={"Retry-After": str(unreachable.retry_after_seconds)},
        )
    headers = {
        "Content-Disposition": _content_disposition(download.file_name),
        "Accept-Ranges": "bytes",
        "Content-Length": str(download.content_length),
    }
    if download.content_range is not None:
        headers["Content-Range"] = download.content_range
    # Should the store stop answering mid-body, the status line is already out: the transfer is broken
    # off (the client sees it incomplete), never ended as if the file were whole.
    return BreakableStreamingResponse(
        download.chunks,
        status_code=206 if download.partial else 200,
        media_type=_download_media_type(download.content_type),
        headers=headers,
        breaks_on=(ArtifactStoreUnreachable,),
    )
