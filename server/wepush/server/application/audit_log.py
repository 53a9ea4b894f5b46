"""Reading the audit log (use cases, one transaction each): a workspace ADMIN searches its own events."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._accounts_scan import scan_page
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


def _occurred_key(event: AuditEvent) -> Keyset:
    return Keyset(event.occurred_at, event.id)


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
        after = query.occurred_after

        def keep(event: AuditEvent) -> bool:
            if query.actor_id is not None and event.actor_id != query.actor_id:
                return False
            return after is None or event.occurred_at > after

        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)

            async def fetch(request: PageRequest[Keyset]) -> Page[AuditEvent, Keyset]:
                return await uow.audit.list_page(
                    workspace_id,
                    request,
                    action=query.action,
                    resource_type=query.resource_type,
                    resource_id=query.resource_id,
                    since=after,
                    until=query.occurred_before,
                )

            # The repository filters all but the actor and the exclusive lower bound; those are skipped here.
            if query.actor_id is None and after is None:
                return await fetch(page)
            return await scan_page(fetch, page, keep=keep, key=_occurred_key)
