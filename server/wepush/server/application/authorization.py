"""Final authorization decisions, taken in the application layer (handlers only authenticate).

Another workspace's resources are reported as not found, so their existence does not leak; a role that
is too weak is ACCESS_DENIED. SYSTEM_ADMIN crosses workspaces but every action still names its target
workspace in the audit log.
"""

from __future__ import annotations

from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import NotFound

_RANK = {Role.VIEWER: 1, Role.OPERATOR: 2, Role.ADMIN: 3}


def authorize(principal: Principal, workspace_id: str, minimum: Role) -> Role:
    """The caller's effective role in ``workspace_id`` if it is at least ``minimum``."""
    if principal.type is not PrincipalType.USER:
        raise AccessDenied("Only user API tokens may call the public API.")
    if principal.system_admin:
        return Role.ADMIN
    role = principal.role_in(workspace_id)
    if role is None:
        raise NotFound("Workspace", workspace_id)
    if _RANK[role] < _RANK[minimum]:
        raise AccessDenied(f"This operation needs the {minimum.value} role; the caller is {role.value}.")
    return role


def granted_by_system_admin(principal: Principal, workspace_id: str, minimum: Role) -> bool:
    """Whether only SYSTEM_ADMIN lets the caller act in ``workspace_id`` at ``minimum``: it holds no role
    of its own there, or one too weak. Such an action must be audited even when it only reads."""
    if principal.type is not PrincipalType.USER or not principal.system_admin:
        return False
    role = principal.role_in(workspace_id)
    return role is None or _RANK[role] < _RANK[minimum]


def require_system_admin(principal: Principal) -> None:
    if principal.type is not PrincipalType.USER or not principal.system_admin:
        raise AccessDenied("This operation needs the SYSTEM_ADMIN role.")
