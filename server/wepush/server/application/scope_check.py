"""The basic scope check of a request refused before its use case runs.

The seed splits authorization in two: the controller only authenticates and checks the basic scope
("Controller 只完成认证和基础 Scope 检查"); the application service takes the final decision. Each use case
authorizes first thing and audits a refusal. But a request whose parameters or body are malformed never
reaches its use case: a VIEWER's malformed create, or a token of another workspace probing its ids, was
answered 400 — describing the rules of an operation the caller may not call — and nobody could see the
attempt. The API asks this check before it answers such a request, and before it answers an operation
that is not implemented yet (501), against the role the contract declares for the operation: a caller
below it is refused 403, one with no role in the workspace 404, and the refusal is audited DENIED under
the action ``request.refused``, its summary naming the operation.
"""

from __future__ import annotations

from typing import Final

from wepush.server.application._accounts_access import (
    SYSTEM_ADMIN_ACCESS,
    record_refusal,
    record_system_admin_access,
    require_system_admin_audited,
)
from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, Role
from wepush.server.application.authorization import authorize, granted_by_system_admin
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import NotFound

__all__ = ["REQUEST_REFUSED_ACTION", "SYSTEM_ADMIN_ROLE", "ScopeCheck"]

#: The audit action of a request refused by its scope before its use case ran.
REQUEST_REFUSED_ACTION: Final = "request.refused"
#: The contract's name for the role that crosses workspaces (not a workspace role).
SYSTEM_ADMIN_ROLE: Final = "SYSTEM_ADMIN"


class ScopeCheck:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    async def refuse_outside(
        self,
        principal: Principal,
        operation: str,
        minimum: str,
        workspace_id: str | None,
        *,
        resource_type: str,
        trace_id: str | None = None,
    ) -> None:
        """Return if ``principal`` holds ``minimum`` (a workspace role, or SYSTEM_ADMIN) for ``operation``
        in ``workspace_id``; otherwise audit the refusal and raise 404 (no role there) or 403."""
        if minimum == SYSTEM_ADMIN_ROLE:
            await self._system_scope(principal, operation, resource_type, trace_id)
            return
        if workspace_id is None:
            # Outside any workspace (the provider catalog, one's own workspaces): every API token may
            # call it, so the request's own problem stands.
            return
        refusal: NotFound | AccessDenied
        try:
            authorize(principal, workspace_id, Role(minimum))
        except NotFound as outside:
            refusal, why = outside, "the caller has no role in this workspace (answered 404)"
        except AccessDenied as too_weak:
            refusal, why = too_weak, f"needs the {minimum} role"
        else:
            if granted_by_system_admin(principal, workspace_id, Role(minimum)):
                # Everything a SYSTEM_ADMIN does in a workspace it holds no role in leaves a trace there,
                # a request then refused as malformed (or not implemented) included.
                await record_system_admin_access(
                    self._deps,
                    principal,
                    workspace_id,
                    resource_type=resource_type,
                    summary=f"{SYSTEM_ADMIN_ACCESS}; granted for {operation}, whose request was then "
                    "refused before its use case ran (malformed, or not implemented)",
                    trace_id=trace_id,
                )
            return
        await record_refusal(
            self._deps,
            principal,
            workspace_id,
            action=REQUEST_REFUSED_ACTION,
            resource_type=resource_type,
            summary=f"{operation}: {why}; refused before its request was read",
            trace_id=trace_id,
        )
        raise refusal

    async def _system_scope(
        self, principal: Principal, operation: str, resource_type: str, trace_id: str | None
    ) -> None:
        await require_system_admin_audited(
            self._deps,
            principal,
            action=REQUEST_REFUSED_ACTION,
            resource_type=resource_type,
            summary=f"{operation}: needs SYSTEM_ADMIN; refused before its request was read",
            trace_id=trace_id,
        )
