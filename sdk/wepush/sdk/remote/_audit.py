"""Audit events: a workspace's (``WorkspaceClient.audit``) and the system-wide ones (``WePushClient.audit``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, TypedDict

from typing_extensions import Unpack

from wepush_client import AuditApi
from wepush_client.models import AuditEvent, AuditEventPage

from ._session import Session
from ._support import Resource, WorkspaceResource, iterate_pages, utc_instant

__all__ = ["AuditClient", "AuditFilters", "SystemAuditClient"]


class AuditFilters(TypedDict, total=False):
    """Filters of an audit search; all given ones must match.

    ``occurred_after`` and ``occurred_before`` are exclusive bounds and must be timezone-aware datetimes
    (a naive one is refused with ``InvalidRequest``); they are sent in UTC.
    """

    action: str
    """Dotted action name, for example ``account.update``, ``run.cancel``, ``token.revoke``."""
    actor_id: str
    resource_type: str
    """For example ``ACCOUNT``."""
    resource_id: str
    outcome: str
    """``SUCCESS``, ``DENIED`` (the refused attempts) or ``FAILED``."""
    occurred_after: datetime
    occurred_before: datetime


def _wire_filters(filters: AuditFilters) -> dict[str, Any]:
    """The filters as the generated operation takes them, with the time bounds in UTC."""
    wire: dict[str, Any] = dict(filters)
    for bound in ("occurred_after", "occurred_before"):
        if bound in wire:
            wire[bound] = utc_instant(bound, wire[bound])
    return wire


class AuditClient(WorkspaceResource):
    """``/workspaces/{id}/audit-events`` (ADMIN): ``AuditEventPage`` / ``AuditEvent``, newest first."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(AuditApi)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, **filters: Unpack[AuditFilters]
    ) -> AuditEventPage:
        """One page; pass ``page.next_cursor`` back as ``cursor`` with the same filters for the next."""
        return self._api.list_audit_events(
            self._workspace_id, limit=limit, cursor=cursor, **_wire_filters(filters)
        )

    def iterate(
        self, *, page_size: int | None = None, **filters: Unpack[AuditFilters]
    ) -> Iterator[AuditEvent]:
        """Every matching event, fetching pages lazily."""
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, **filters))


class SystemAuditClient(Resource):
    """``/audit-events`` (SYSTEM_ADMIN): events recorded outside any workspace, newest first.

    For example a refused attempt to create a workspace; each read is itself audited there.
    """

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._api = self._generated(AuditApi)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, **filters: Unpack[AuditFilters]
    ) -> AuditEventPage:
        return self._api.list_system_audit_events(limit=limit, cursor=cursor, **_wire_filters(filters))

    def iterate(
        self, *, page_size: int | None = None, **filters: Unpack[AuditFilters]
    ) -> Iterator[AuditEvent]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, **filters))
