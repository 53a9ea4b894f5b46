"""User API tokens (use cases, one transaction each).

Only the keyed hash of a token is stored; the plaintext exists once, in the creation response. A token is
its own principal (``principal_id`` is the token id), so roles granted to it in other workspaces through
the members API never widen another token. A workspace ADMIN manages the tokens of that workspace only,
and never sees or revokes a SYSTEM_ADMIN token.

A name is unique among the workspace's tokens that can still be used: a revoked or expired token is kept
only for the audit trail and the list, so its name can be given to its replacement. SYSTEM_ADMIN tokens,
which a workspace ADMIN cannot see, have names of their own: refusing a name because one of them has it
would tell a workspace ADMIN that it exists. With no unique index to lean on (one could not say "still
usable"), creations in one workspace queue on the workspace row, as membership changes do, so two
concurrent creates cannot both find the name free.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._workspace_admins import ensure_revocation_keeps_admins
from wepush.server.application.auth import Principal, Role
from wepush.server.application.credentials import TokenKind
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.domain import (
    ApiToken,
    DomainError,
    Keyset,
    NameAlreadyUsed,
    NotFound,
    Page,
    PageRequest,
    UnitOfWork,
    WorkspaceRole,
    new_id,
)

__all__ = ["IssuedToken", "ListedToken", "TokenService"]

RESOURCE = "API_TOKEN"
_log = logging.getLogger("wepush.server.tokens")
_PAGE = 200


class TokenNameAlreadyUsed(NameAlreadyUsed):
    """The 400 ``NAME_ALREADY_USED`` of every named resource, with a detail that does not repeat the name
    (problems never echo what was submitted)."""

    def __init__(self, name: str) -> None:
        DomainError.__init__(self, "Another API token of the workspace that is still usable has this name.")
        self.resource_type = "API token"
        self.detail = "name"
        self.name = name


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A created token and its plaintext, which is shown to the caller once and never stored."""

    token: ApiToken
    plaintext: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ListedToken:
    """A token and the role it acts with in its workspace now (its member role there, if one was put)."""

    token: ApiToken
    role: WorkspaceRole


class TokenService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    async def list_page(
        self, principal: Principal, workspace_id: str, page: PageRequest[Keyset]
    ) -> Page[ListedToken, Keyset]:
        await authorize_audited(
            self._deps, principal, workspace_id, Role.ADMIN, action="token.list", resource_type=RESOURCE
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            # A workspace ADMIN never sees SYSTEM_ADMIN tokens.
            only = None if principal.system_admin else False
            found = await uow.api_tokens.list_page(workspace_id, page, system_admin=only)
            # Authentication obeys a member role over the issued one, so the list must show it too: an
            # ADMIN reviewing who may do what would otherwise see a demoted token as still ADMIN.
            members = await uow.workspaces.member_roles(workspace_id, {t.principal_id for t in found.items})
        listed = [ListedToken(t, members.get(t.principal_id, t.role)) for t in found.items]
        return Page(listed, found.next_after)

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        name: str,
        role: WorkspaceRole,
        expires_at: datetime | None,
        trace_id: str | None = None,
    ) -> IssuedToken:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="token.create",
            resource_type=RESOURCE,
            trace_id=trace_id,
        )
        now = self._deps.clock()
        if expires_at is not None and (expires_at.utcoffset() is None or expires_at <= now):
            raise ValidationFailed(
                "The token would never be usable.",
                [FieldIssue("/expiresAt", "OUT_OF_RANGE", "must be a future instant with a time zone")],
            )
        issued = self._deps.tokens.issue(TokenKind.USER)
        token_id = new_id()
        token = ApiToken(
            id=token_id,
            workspace_id=workspace_id,
            name=name,
            token_hash=issued.hash,
            token_prefix=issued.prefix_hint,
            role=role,
            principal_id=token_id,
            expires_at=expires_at,
            created_at=now,
            updated_at=now,
        )
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            # Held until commit: the next create of this workspace sees this token (module docstring).
            await uow.workspaces.get(workspace_id, for_membership_change=True)
            if await _name_taken(uow, workspace_id, name, now):
                raise TokenNameAlreadyUsed(name)
            stored = await uow.api_tokens.add(token)
            await self._deps.auditor.record(
                uow,
                principal,
                "token.create",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=stored.id,
                fields=["name", "role", *(["expiresAt"] if expires_at else [])],
                summary=f"API token created with the {role.value} role",
                trace_id=trace_id,
            )
        return IssuedToken(stored, issued.plaintext)

    async def revoke(
        self, principal: Principal, workspace_id: str, token_id: str, *, trace_id: str | None = None
    ) -> None:
        """Idempotent: revoking a revoked token changes nothing and records nothing."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.ADMIN,
            action="token.revoke",
            resource_type=RESOURCE,
            resource_id=token_id,
            trace_id=trace_id,
        )
        async with self._deps.uow() as uow:
            token = await uow.api_tokens.get(token_id)
            if token.workspace_id != workspace_id or (token.system_admin and not principal.system_admin):
                raise NotFound("api_token", token_id)
            if token.revoked_at is not None:
                return
            now = self._deps.clock()
            # Refused for a SYSTEM_ADMIN caller too, as a demotion is: it can make another token ADMIN
            # first, and the workspace is never left to it alone.
            orphaned = await ensure_revocation_keeps_admins(uow, token, now)
            await uow.api_tokens.update(replace(token, revoked_at=now))
            await self._deps.auditor.record(
                uow,
                principal,
                "token.revoke",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=token_id,
                summary="API token revoked",
                trace_id=trace_id,
            )
            for other in orphaned:
                _log.warning(
                    "workspace %s has no working ADMIN left: its last one, token %s of workspace %s, was "
                    "revoked; a SYSTEM_ADMIN can issue it a new ADMIN token",
                    other,
                    token_id,
                    workspace_id,
                    extra={"event": "WORKSPACE_ADMIN_LOST"},
                )
                # Told where it matters too: in that workspace's audit, for its SYSTEM_ADMIN to see.
                await self._deps.auditor.record(
                    uow,
                    principal,
                    "workspace.admin.lost",
                    "WORKSPACE",
                    workspace_id=other,
                    resource_id=other,
                    summary="its last working ADMIN, a token of another workspace, was revoked there; "
                    "a SYSTEM_ADMIN can issue a new ADMIN token",
                    trace_id=trace_id,
                )


async def _name_taken(uow: UnitOfWork, workspace_id: str, name: str, now: datetime) -> bool:
    """Whether a usable token of the workspace, other than a SYSTEM_ADMIN one, is named ``name``."""
    after: Keyset | None = None
    while True:
        page = await uow.api_tokens.list_page(
            workspace_id, PageRequest(limit=_PAGE, after=after), system_admin=False
        )
        if any(t.name == name and t.is_usable(now) for t in page.items):
            return True
        if page.next_after is None:
            return False
        after = page.next_after
