"""The audit trail of a workspace, newest first."""

from __future__ import annotations

from datetime import datetime

from connexion.lifecycle import ConnexionResponse

from wepush.server.api._auth import current_principal
from wepush.server.api._context import services
from wepush.server.api._paging import keyset_request, page_body
from wepush.server.api._render_core import parse_instant, render_audit_event
from wepush.server.api._responses import json_response
from wepush.server.application.audit_log import AuditQuery
from wepush.server.application.errors import FieldIssue, ValidationFailed

_RESOURCE = "audit-events"


def _instant(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    value = parse_instant(text)
    if value is None:
        raise ValidationFailed(
            f"{name} is not an instant.",
            [FieldIssue(name, "INVALID_FORMAT", "must be an ISO-8601 date-time with a time zone")],
        )
    return value


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
) -> ConnexionResponse:
    query = AuditQuery(
        action=action,
        actor_id=actor_id,
        resource_type=resource_type,
        resource_id=resource_id,
        occurred_after=_instant("occurredAfter", occurred_after),
        occurred_before=_instant("occurredBefore", occurred_before),
    )
    filters = {
        "workspaceId": workspace_id,
        "action": action,
        "actorId": actor_id,
        "resourceType": resource_type,
        "resourceId": resource_id,
        "occurredAfter": query.occurred_after,
        "occurredBefore": query.occurred_before,
    }
    page = keyset_request(_RESOURCE, filters, limit, cursor)
    found = await services().resources.audit.list_page(current_principal(), workspace_id, page, query)
    return json_response(page_body(found, render_audit_event, resource=_RESOURCE, filters=filters))
