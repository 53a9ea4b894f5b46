"""Reading the audit log (use cases, one transaction each): a workspace ADMIN searches its own events, a
SYSTEM_ADMIN also those recorded outside any workspace (a refused attempt to create one, say)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, Role
from wepush.server.application.authorization import require_system_admin
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import AuditEvent, AuditOutcome, Keyset, Page, PageRequest, UnitOfWork

__all__ = ["AuditQuery", "AuditQueryService"]

_RESOURCE = "AUDIT_EVENT"


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters; ``occurred_after`` and ``occurred_before`` are both exclusive."""

    action: str | None = None
    actor_id: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    outcome: AuditOutcome | None = None
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
            self._deps, principal, workspace_id, Role.ADMIN, action="audit.read", resource_type=_RESOURCE
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await _search(uow, workspace_id, page, query)

    async def list_system_page(
        self,
        principal: Principal,
        page: PageRequest[Keyset],
        query: AuditQuery,
        *,
        trace_id: str | None = None,
    ) -> Page[AuditEvent, Keyset]:
        """The events without a workspace, newest first; the read itself is recorded among them, and so is
        a refused one."""
        try:
            require_system_admin(principal)
        except AccessDenied:
            outcome = AuditOutcome.DENIED
        else:
            outcome = AuditOutcome.SUCCESS
        async with self._deps.uow() as uow:
            await self._deps.auditor.record(
                uow,
                principal,
                "audit.read",
                _RESOURCE,
                workspace_id=None,
                outcome=outcome,
                summary="system audit events" if outcome is AuditOutcome.SUCCESS else "needs SYSTEM_ADMIN",
                trace_id=trace_id,
            )
        if outcome is AuditOutcome.DENIED:
            raise AccessDenied("Reading the system audit events needs the SYSTEM_ADMIN role.")
        async with self._deps.uow(read_only=True) as uow:
            return await _search(uow, None, page, query)


async def _search(
    uow: UnitOfWork, workspace_id: str | None, page: PageRequest[Keyset], query: AuditQuery
) -> Page[AuditEvent, Keyset]:
    return await uow.audit.list_page(
        workspace_id,
        page,
        action=query.action,
        actor_id=query.actor_id,
        resource_type=query.resource_type,
        resource_id=query.resource_id,
        outcome=query.outcome,
        occurred_after=query.occurred_after,
        until=query.occurred_before,
    )
