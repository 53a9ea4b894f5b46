"""Who administers a workspace: the "last ADMIN" guard counts what authentication would grant.

A token acts in a workspace with its membership role there, or, in its own workspace and without a
membership, with the role it was issued with; a revoked or expired token grants nothing. Counting only
membership rows let a token issued as ADMIN demote itself, and counted a revoked ADMIN as a keeper, so
the last working ADMIN could go.

A SYSTEM_ADMIN token is never a workspace's working ADMIN, whatever role it holds there: a workspace
ADMIN cannot see or revoke it, and the bootstrap one (ADMIN of the default workspace) is meant to be
retired. Counting it let the only ordinary ADMIN of the default workspace demote itself.

Every check runs with the workspace row held (``for_membership_change``), so two changes that each
leave the other as the remaining ADMIN (two demotions, two revocations, one of each) run one at a time
and the second sees what the first committed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import ClassVar, TypeVar

from wepush.server.domain import (
    ApiToken,
    DomainError,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    UnitOfWork,
    WorkspaceMember,
    WorkspaceRole,
)

__all__ = [
    "LastAdminRequired",
    "acts_as_admin_without_membership",
    "another_admin",
    "ensure_revocation_keeps_admins",
    "is_working_admin",
]

_PAGE = 200
_T = TypeVar("_T")


class LastAdminRequired(DomainError):
    """The change would leave a workspace without a working ADMIN, so nobody could manage it."""

    code: ClassVar[str] = "RESOURCE_IN_USE"

    def __init__(self, workspace_id: str, *, revoking: bool = False) -> None:
        super().__init__(
            "Revoking this token would leave its workspace without a working ADMIN; "
            "make another token ADMIN first."
            if revoking
            else "The workspace needs at least one working ADMIN; make another token ADMIN first."
        )
        self.workspace_id = workspace_id


async def _every(
    read: Callable[[PageRequest[Keyset]], Awaitable[Page[_T, Keyset]]],
) -> AsyncIterator[_T]:
    after: Keyset | None = None
    while True:
        page = await read(PageRequest(limit=_PAGE, after=after))
        for item in page.items:
            yield item
        if page.next_after is None:
            return
        after = page.next_after


def _members(uow: UnitOfWork, workspace_id: str) -> AsyncIterator[WorkspaceMember]:
    return _every(lambda page: uow.workspaces.list_members(workspace_id, page))


def _tokens(uow: UnitOfWork, workspace_id: str) -> AsyncIterator[ApiToken]:
    return _every(lambda page: uow.api_tokens.list_page(workspace_id, page, system_admin=False))


def is_working_admin(token: ApiToken | None, now: datetime) -> bool:
    """Whether ``token`` counts at all: usable now, and no SYSTEM_ADMIN (see the module docstring)."""
    return token is not None and token.is_usable(now) and not token.system_admin


async def _counts(uow: UnitOfWork, principal_id: str, now: datetime) -> bool:
    try:
        token = await uow.api_tokens.get(principal_id)
    except NotFound:
        return False
    return token.principal_id == principal_id and is_working_admin(token, now)


def acts_as_admin_without_membership(token: ApiToken, workspace_id: str, now: datetime) -> bool:
    """A working ADMIN by the role it was issued with (it has no membership in ``workspace_id``)."""
    return (
        token.workspace_id == workspace_id
        and token.role is WorkspaceRole.ADMIN
        and is_working_admin(token, now)
    )


async def another_admin(uow: UnitOfWork, workspace_id: str, principal_id: str, now: datetime) -> bool:
    """Whether a working ADMIN other than ``principal_id`` is in the workspace."""
    with_membership: set[str] = set()
    async for member in _members(uow, workspace_id):
        with_membership.add(member.principal_id)
        if (
            member.role is WorkspaceRole.ADMIN
            and member.principal_id != principal_id
            and await _counts(uow, member.principal_id, now)
        ):
            return True
    async for token in _tokens(uow, workspace_id):
        if (
            token.principal_id != principal_id
            and token.principal_id not in with_membership
            and acts_as_admin_without_membership(token, workspace_id, now)
        ):
            return True
    return False


async def _administered_by(uow: UnitOfWork, token: ApiToken, now: datetime) -> list[str]:
    """The workspaces ``token`` is a working ADMIN of, by membership or (in its own workspace, without a
    membership) by the role it was issued with; sorted, the order every revocation takes their rows in."""
    if not is_working_admin(token, now):
        return []
    memberships = await uow.workspaces.memberships_of(token.principal_id)
    administered = {m.workspace_id for m in memberships if m.role is WorkspaceRole.ADMIN}
    home = token.workspace_id
    with_membership = {m.workspace_id for m in memberships}
    if (
        home is not None
        and home not in with_membership
        and acts_as_admin_without_membership(token, home, now)
    ):
        administered.add(home)
    return sorted(administered)


async def ensure_revocation_keeps_admins(uow: UnitOfWork, token: ApiToken, now: datetime) -> list[str]:
    """:class:`LastAdminRequired` when revoking ``token`` would leave its own workspace without a working
    ADMIN; otherwise the other workspaces it leaves without one (to be told in their audit).

    Only the token's own workspace can refuse: a revocation answers a leaked credential, and another
    workspace that made the token its ADMIN through a membership must not keep its owner from revoking
    it (nor can the owner act there). Such a workspace is left to a SYSTEM_ADMIN, who can issue it an
    ADMIN. Holds each workspace's row until the caller's transaction ends, like a demotion, so a
    revocation and a demotion (or two revocations) cannot each count on the other staying."""
    administered = await _administered_by(uow, token, now)
    for workspace_id in administered:
        await uow.workspaces.get(workspace_id, for_membership_change=True)
    orphaned: list[str] = []
    for workspace_id in administered:
        if await another_admin(uow, workspace_id, token.principal_id, now):
            continue
        if workspace_id == token.workspace_id:
            raise LastAdminRequired(workspace_id, revoking=True)
        orphaned.append(workspace_id)
    return orphaned
