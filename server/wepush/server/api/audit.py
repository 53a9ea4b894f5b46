"""The audit trail of a workspace, newest first."""

from __future__ import annotations

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal, current_trace_id
from wepush.server.api._context import services
from wepush.server.api._instants import read_instant
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_core import render_audit_event
from wepush.server.api._responses import json_response
from wepush.server.application.audit_log import AuditQuery
from wepush.server.domain import AuditOutcome

_RESOURCE = "audit-events"
#: Its own cursor scope: a workspace's cursor is not valid on the system list, nor the other way round.
_SYSTEM_RESOURCE = "system-audit-events"


async def list_audit_events(
    workspace_id: str,
    limit: int | None = None,
    cursor: str | None = None,
    action: str | None = None,
    actor_id: str | None = None,
    resource_type: str | None = None,
    resource_id: str | None = None,
    occurred_after: str | None = None,
    occurred_before: str | None = None,
    outcome: str | None = None,
) -> ConnexionResponse:
    query, filters = _query(
        action, actor_id, resource_type, resource_id, occurred_after, occurred_before, outcome
    )
    filters["workspaceId"] = workspace_id
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.audit.list_page(current_principal(), workspace_id, page, query)
    return json_response(page_body(found, render_audit_event, resource=_RESOURCE, filters=filters))


async def list_system_audit_events(
    limit: int | None = None,
    cursor: str | None = None,
    action: str | None = None,
    actor_id: str | None = None,
    resource_type: str | None = None,
    resource_id: str | None = None,
    occurred_after: str | None = None,
    occurred_before: str | None = None,
    outcome: str | None = None,
) -> ConnexionResponse:
    query, filters = _query(
        action, actor_id, resource_type, resource_id, occurred_after, occurred_before, outcome
    )
    page = keyset_request(_SYSTEM_RESOURCE, filters, limit, cursor)
    found = await services().resources.audit.list_system_page(
        current_principal(), page, query, trace_id=current_trace_id()
    )
    return json_response(page_body(found, render_audit_event, resource=_SYSTEM_RESOURCE, filters=filters))


def _query(
    action: str | None,
    actor_id: str | None,
    resource_type: str | None,
    resource_id: str | None,
    occurred_after: str | None,
    occurred_before: str | None,
    outcome: str | None,
) -> tuple[AuditQuery, dict[str, object]]:
    query = AuditQuery(
        action=action,
        actor_id=actor_id,
        resource_type=resource_type,
        resource_id=resource_id,
        outcome=None if outcome is None else AuditOutcome(outcome),
        occurred_after=read_instant("occurredAfter", occurred_after),
        occurred_before=read_instant("occurredBefore", occurred_before),
    )
    filters: dict[str, object] = {
        "action": action,
        "actorId": actor_id,
        "resourceType": resource_type,
        "resourceId": resource_id,
        "occurredAfter": query.occurred_after,
        "occurredBefore": query.occurred_before,
        "outcome": outcome,
    }
    return query, filters
