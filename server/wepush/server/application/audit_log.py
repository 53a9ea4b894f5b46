"""Reading the audit log (use cases, one transaction each): a workspace ADMIN searches its own events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, Role
from wepush.server.domain import AuditEvent, Keyset, Page, PageRequest

__all__ = ["AuditQuery", "AuditQueryService"]


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters; ``occurred_after`` and ``occurred_before`` are both exclusive."""

    action: str | None = None
    actor_id: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None


class AuditQueryService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    async def list_page(
        self, principal: Principal, workspace_id: str, page: PageRequest[Keyset], query: AuditQuery
    ) -> Page[AuditEvent, Keyset]:
        """Newest first."""
        await authorize_audited(
            self._deps, principal, workspace_id, Role.ADMIN, action="audit.read", resource_type="AUDIT_EVENT"
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.audit.list_page(
                workspace_id,
                page,
                action=query.action,
                actor_id=query.actor_id,
                resource_type=query.resource_type,
                resource_id=query.resource_id,
                occurred_after=query.occurred_after,
                until=query.occurred_before,
            )
