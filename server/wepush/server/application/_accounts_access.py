"""Authorization shared by the workspace-scoped use cases of this package, audited where the seed asks.

The seed requires permission failures to be audited. A refusal is recorded in a transaction of its own
(the use case's transaction never opens), and only for callers who can see the workspace: someone
outside it gets RESOURCE_NOT_FOUND and leaves no trace in that workspace's log.

It also requires every SYSTEM_ADMIN operation to be audited. When only SYSTEM_ADMIN lets the caller in
(it holds no role of its own in the workspace, or one too weak), the access is recorded as a SUCCESS
event, reads included, in a short transaction of its own that commits before the use case's
transaction opens: the trace exists even if the use case then fails, and a read-only use case stays
read-only.
"""

from __future__ import annotations

from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, Role
from wepush.server.application.authorization import authorize, granted_by_system_admin, require_system_admin
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import AuditOutcome, NotFound, UnitOfWork

__all__ = [
    "SYSTEM_ADMIN_ACCESS",
    "SYSTEM_ADMIN_ACCESS_ACTION",
    "authorize_audited",
    "ensure_workspace",
    "record_refusal",
    "record_system_admin_access",
    "require_system_admin_audited",
]

#: The summary of the audit event recording an access that only SYSTEM_ADMIN allowed.
SYSTEM_ADMIN_ACCESS = "SYSTEM_ADMIN access: the caller holds no sufficient role in this workspace"
#: The action of the event that records a SYSTEM_ADMIN crossing into a workspace. Its SUCCESS says the
#: access was granted, nothing more: the operation it was granted for is named in the summary, and records
#: its own event when it succeeds, so filtering by that operation's action never shows an attempt that then
#: failed (a refused body, a conflict) as done.
SYSTEM_ADMIN_ACCESS_ACTION = "system_admin.access"


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
    """:func:`authorize`, recording an ACCESS_DENIED refusal as a DENIED audit event before re-raising,
    and an access granted only by SYSTEM_ADMIN as a SUCCESS ``system_admin.access`` event naming the action
    (404 first if the workspace is gone)."""

    async def denied(summary: str) -> None:
        await record_refusal(
            deps,
            principal,
            workspace_id,
            action=action,
            resource_type=resource_type,
            resource_id=resource_id,
            summary=summary,
            trace_id=trace_id,
        )

    try:
        role = authorize(principal, workspace_id, minimum)
    except NotFound:
        # No role here: answered 404, so that the workspace's existence stays hidden from the caller,
        # and still audited (seed: permission failures are audited).
        await denied("the caller has no role in this workspace (answered 404)")
        raise
    except AccessDenied:
        await denied(f"needs the {minimum.value} role")
        raise
    if granted_by_system_admin(principal, workspace_id, minimum):
        await record_system_admin_access(
            deps,
            principal,
            workspace_id,
            resource_type=resource_type,
            resource_id=resource_id,
            summary=f"{SYSTEM_ADMIN_ACCESS}; granted for {action}",
            trace_id=trace_id,
        )
    return role


async def record_system_admin_access(
    deps: ServiceDeps,
    principal: Principal,
    workspace_id: str,
    *,
    resource_type: str,
    summary: str,
    resource_id: str | None = None,
    trace_id: str | None = None,
) -> None:
    """The ``system_admin.access`` event of a SYSTEM_ADMIN acting where it holds no sufficient role (404
    first if the workspace is gone)."""
    async with deps.uow() as uow:
        await uow.workspaces.get(workspace_id)
        # The auditor marks every event of a SYSTEM_ADMIN principal with ``systemAdmin: true``.
        await deps.auditor.record(
            uow,
            principal,
            SYSTEM_ADMIN_ACCESS_ACTION,
            resource_type,
            workspace_id=workspace_id,
            resource_id=resource_id,
            summary=summary,
            trace_id=trace_id,
        )


async def record_refusal(
    deps: ServiceDeps,
    principal: Principal,
    workspace_id: str,
    *,
    action: str,
    resource_type: str,
    summary: str,
    resource_id: str | None = None,
    trace_id: str | None = None,
) -> None:
    """A DENIED audit event in a transaction of its own, recorded in the workspace for its ADMINs to see;
    a workspace that does not exist has no audit."""
    async with deps.uow() as uow:
        if await _exists(uow, workspace_id):
            await deps.auditor.record(
                uow,
                principal,
                action,
                resource_type,
                workspace_id=workspace_id,
                resource_id=resource_id,
                outcome=AuditOutcome.DENIED,
                summary=summary,
                trace_id=trace_id,
            )


async def require_system_admin_audited(
    deps: ServiceDeps,
    principal: Principal,
    *,
    action: str,
    resource_type: str,
    summary: str,
    trace_id: str | None = None,
) -> None:
    """:func:`require_system_admin`, recording a refusal as a DENIED event outside any workspace (read by
    a SYSTEM_ADMIN at ``GET /audit-events``) before re-raising."""
    try:
        require_system_admin(principal)
    except AccessDenied:
        async with deps.uow() as uow:
            await deps.auditor.record(
                uow,
                principal,
                action,
                resource_type,
                workspace_id=None,
                outcome=AuditOutcome.DENIED,
                summary=summary,
                trace_id=trace_id,
            )
        raise


async def _exists(uow: UnitOfWork, workspace_id: str) -> bool:
    try:
        await uow.workspaces.get(workspace_id)
    except NotFound:
        return False
    return True


async def ensure_workspace(uow: UnitOfWork, principal: Principal, workspace_id: str) -> None:
    """A SYSTEM_ADMIN passes :func:`authorize` for any id; make sure the workspace really exists (404)."""
    if principal.system_admin:
        await uow.workspaces.get(workspace_id)
