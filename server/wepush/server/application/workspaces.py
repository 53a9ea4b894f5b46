"""Workspaces and their members (use cases, one transaction each).

Only a SYSTEM_ADMIN creates workspaces and sees all of them; everyone else sees the workspaces they hold
a role in. Member roles are explicit grants to a principal (an API token's principal is the token id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from wepush.server.application._accounts_access import (
    authorize_audited,
    ensure_workspace,
    require_system_admin_audited,
)
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._unchanged import renamed_fields, unchanged
from wepush.server.application._workspace_admins import (
    LastAdminRequired,
    acts_as_admin_without_membership,
    another_admin,
    is_working_admin,
)
from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.errors import AccessDenied
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import (
    ApiToken,
    JsonObject,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    UnitOfWork,
    VersionConflict,
    Workspace,
    WorkspaceMember,
    WorkspaceRole,
)

__all__ = ["LastAdminRequired", "WorkspaceService"]

RESOURCE = "WORKSPACE"
MEMBER_RESOURCE = "WORKSPACE_MEMBER"


class WorkspaceService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    async def list_page(
        self,
        principal: Principal,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        trace_id: str | None = None,
    ) -> Page[Workspace, Keyset]:
        if principal.type is not PrincipalType.USER:
            raise AccessDenied("Only user API tokens may call the public API.")
        # Everyone but a SYSTEM_ADMIN sees only the workspaces they hold a role in.
        ids = None if principal.system_admin else principal.roles.keys()
        async with self._deps.uow(read_only=True) as uow:
            found = await uow.workspaces.list_page(page, name=name, ids=ids)
        beyond = [w.id for w in found.items if w.id not in principal.roles]
        if beyond:
            # A view across workspaces only SYSTEM_ADMIN grants: audited, like every such access (seed:
            # 每次操作仍携带目标 workspaceId 并进入审计), as one system event naming how many it saw.
            async with self._deps.uow() as uow:
                await self._deps.auditor.record(
                    uow,
                    principal,
                    "workspace.list",
                    RESOURCE,
                    workspace_id=None,
                    summary=f"SYSTEM_ADMIN access: listed {len(beyond)} workspace(s) the caller holds no role in",
                    trace_id=trace_id,
                )
        return found

    async def create(
        self,
        principal: Principal,
        *,
        name: str,
        description: str,
        idempotency: IdempotencyRequest | None,
        render: Callable[[Workspace], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await require_system_admin_audited(
            self._deps,
            principal,
            action="workspace.create",
            resource_type=RESOURCE,
            summary="needs the SYSTEM_ADMIN role",
            trace_id=trace_id,
        )
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def action() -> Outcome:
                    workspace = await uow.workspaces.add(
                        Workspace(name=name, description=description, created_at=now, updated_at=now)
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "workspace.create",
                        RESOURCE,
                        workspace_id=workspace.id,
                        resource_id=workspace.id,
                        fields=["name", *(["description"] if description else [])],
                        summary="Workspace created",
                        trace_id=trace_id,
                    )
                    return Outcome(201, render(workspace), workspace.id)

                return await guarded(uow, idempotency, workspace_id=None, now=now, action=action)

        return await once_more_on_race(idempotency, attempt)

    async def get(self, principal: Principal, workspace_id: str) -> Workspace:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="workspace.read",
            resource_type=RESOURCE,
            resource_id=workspace_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            return await uow.workspaces.get(workspace_id)

    async def update(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        name: str,
        description: str,
        version: int,
        trace_id: str | None = None,
    ) -> Workspace:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="workspace.update",
            resource_type=RESOURCE,
            resource_id=workspace_id,
            trace_id=trace_id,
        )
        async with self._deps.uow() as uow:
            current = await uow.workspaces.get(workspace_id)
            changed = renamed_fields(current, name=name, description=description)
            if unchanged("workspace", workspace_id, current=current.version, given=version, changed=changed):
                return current
            if current.version != version:
                raise VersionConflict("workspace", workspace_id, version, current=current.version)
            updated = await uow.workspaces.update(
                replace(current, name=name, description=description, version=version)
            )
            await self._deps.auditor.record(
                uow,
                principal,
                "workspace.update",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=workspace_id,
                fields=changed,
                summary="Workspace updated",
                trace_id=trace_id,
            )
            return updated

    async def list_members(
        self, principal: Principal, workspace_id: str, page: PageRequest[Keyset]
    ) -> Page[WorkspaceMember, Keyset]:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="workspace.member.list",
            resource_type=MEMBER_RESOURCE,
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.workspaces.list_members(workspace_id, page)

    async def put_member_role(
        self,
        principal: Principal,
        workspace_id: str,
        user_id: str,
        role: WorkspaceRole,
        *,
        trace_id: str | None = None,
    ) -> WorkspaceMember:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="workspace.member.put",
            resource_type=MEMBER_RESOURCE,
            resource_id=user_id,
            trace_id=trace_id,
        )
        now = self._deps.clock()
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            await uow.workspaces.get(workspace_id, for_membership_change=True)
            member = await uow.workspaces.find_member(workspace_id, user_id)
            if member is None:
                token = await _token_principal(uow, user_id)
                if (
                    role is not WorkspaceRole.ADMIN
                    and acts_as_admin_without_membership(token, workspace_id, now)
                    and not await another_admin(uow, workspace_id, user_id, now)
                ):
                    raise LastAdminRequired(workspace_id)
                result = await uow.workspaces.add_member(
                    WorkspaceMember(
                        workspace_id=workspace_id,
                        principal_id=user_id,
                        role=role,
                        created_at=now,
                        updated_at=now,
                    )
                )
                summary = f"Member added as {role.value}"
            elif member.role is role:
                return member
            else:
                if member.role is WorkspaceRole.ADMIN:
                    await _keep_an_admin(uow, workspace_id, user_id, now)
                result = await uow.workspaces.update_member(replace(member, role=role))
                summary = f"Member role changed from {member.role.value} to {role.value}"
            await self._deps.auditor.record(
                uow,
                principal,
                "workspace.member.put",
                MEMBER_RESOURCE,
                workspace_id=workspace_id,
                resource_id=user_id,
                fields=["role"],
                summary=summary,
                trace_id=trace_id,
            )
            return result

    async def remove_member(
        self, principal: Principal, workspace_id: str, user_id: str, *, trace_id: str | None = None
    ) -> None:
        """Remove a membership: a token of another workspace loses every role here, one of this workspace
        goes back to the role it was issued with. The workspace keeps a working ADMIN."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="workspace.member.delete",
            resource_type=MEMBER_RESOURCE,
            resource_id=user_id,
            trace_id=trace_id,
        )
        now = self._deps.clock()
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            await uow.workspaces.get(workspace_id, for_membership_change=True)
            member = await uow.workspaces.find_member(workspace_id, user_id)
            if member is None:
                raise NotFound("workspace_member", user_id)
            if member.role is WorkspaceRole.ADMIN:
                token = await _token_or_none(uow, user_id)
                # Back to the role it was issued with: still ADMIN here if that is ADMIN.
                if token is None or not acts_as_admin_without_membership(token, workspace_id, now):
                    await _keep_an_admin(uow, workspace_id, user_id, now)
            await uow.workspaces.remove_member(workspace_id, user_id)
            await self._deps.auditor.record(
                uow,
                principal,
                "workspace.member.delete",
                MEMBER_RESOURCE,
                workspace_id=workspace_id,
                resource_id=user_id,
                fields=["role"],
                summary=f"Member removed (was {member.role.value})",
                trace_id=trace_id,
            )


async def _token_or_none(uow: UnitOfWork, user_id: str) -> ApiToken | None:
    try:
        token = await uow.api_tokens.get(user_id)
    except NotFound:
        return None
    return token if token.principal_id == user_id else None


async def _keep_an_admin(uow: UnitOfWork, workspace_id: str, user_id: str, now: datetime) -> None:
    """``user_id``, an ADMIN member, stops being one: refused if it is the last working ADMIN. A member
    that is no working ADMIN (revoked, expired, SYSTEM_ADMIN) takes nothing away, so it is never refused."""
    if is_working_admin(await _token_or_none(uow, user_id), now) and not await another_admin(
        uow, workspace_id, user_id, now
    ):
        raise LastAdminRequired(workspace_id)


async def _token_principal(uow: UnitOfWork, user_id: str) -> ApiToken:
    """A new member is an API token (a token is its own member): a mistyped id is 404, not a membership
    nobody can ever use. A SYSTEM_ADMIN token is none either, as a workspace ADMIN cannot see one: a role
    here would say it exists, and its reads here would no longer be audited as a SYSTEM_ADMIN's."""
    token = await _token_or_none(uow, user_id)
    if token is None or token.system_admin:
        raise NotFound("api token", user_id)
    return token
