"""Authorization shared by the workspace-scoped use cases of this package, with the denied attempts audited.

The seed requires permission failures to be audited. A refusal is recorded in a transaction of its own
(the use case's transaction never opens), and only for callers who can see the workspace: someone
outside it gets RESOURCE_NOT_FOUND and leaves no trace in that workspace's log.
"""

from __future__ import annotations

from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, Role
from wepush.server.application.authorization import authorize
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import AuditOutcome, UnitOfWork

__all__ = ["authorize_audited", "ensure_workspace"]


async def authorize_audited(
    deps: ServiceDeps,
    principal: Principal,
    workspace_id: str,
    minimum: Role,
    *,
    action: str,
    resource_type: str,
    resource_id: str | None = None,
    trace_id: str | None = None,
) -> Role:
    """:func:`authorize`, recording an ACCESS_DENIED refusal as a DENIED audit event before re-raising."""
    try:
        return authorize(principal, workspace_id, minimum)
    except AccessDenied:
        async with deps.uow() as uow:
            await deps.auditor.record(
                uow,
                principal,
                action,
                resource_type,
                workspace_id=workspace_id,
                resource_id=resource_id,
                outcome=AuditOutcome.DENIED,
                summary=f"needs the {minimum.value} role",
                trace_id=trace_id,
            )
        raise


async def ensure_workspace(uow: UnitOfWork, principal: Principal, workspace_id: str) -> None:
    """A SYSTEM_ADMIN passes :func:`authorize` for any id; make sure the workspace really exists (404)."""
    if principal.system_admin:
        await uow.workspaces.get(workspace_id)
