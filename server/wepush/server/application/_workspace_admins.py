"""Who administers a workspace: the "last ADMIN" guard counts what authentication would grant.

A token acts in a workspace with its membership role there, or, in its own workspace and without a
membership, with the role it was issued with; a revoked or expired token grants nothing. Counting only
membership rows let a token issued as ADMIN demote itself, and counted a revoked ADMIN as a keeper, so
the last working ADMIN could go. A SYSTEM_ADMIN token issued in the workspace as ADMIN (the bootstrap
token, in the default workspace) counts like any other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from wepush.server.domain import (
    ApiToken,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    UnitOfWork,
    WorkspaceMember,
    WorkspaceRole,
)

__all__ = ["acts_as_admin_without_membership", "another_admin"]

_PAGE = 200
_T = TypeVar("_T")


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
    return _every(lambda page: uow.api_tokens.list_page(workspace_id, page))


async def _usable(uow: UnitOfWork, principal_id: str, now: datetime) -> bool:
    try:
        token = await uow.api_tokens.get(principal_id)
    except NotFound:
        return False
    return token.principal_id == principal_id and token.is_usable(now)


def acts_as_admin_without_membership(token: ApiToken, workspace_id: str, now: datetime) -> bool:
    """An ADMIN by the role it was issued with (it has no membership in ``workspace_id``)."""
    return token.workspace_id == workspace_id and token.role is WorkspaceRole.ADMIN and token.is_usable(now)


async def another_admin(uow: UnitOfWork, workspace_id: str, principal_id: str, now: datetime) -> bool:
    """Whether a usable token other than ``principal_id`` is ADMIN in the workspace."""
    with_membership: set[str] = set()
    async for member in _members(uow, workspace_id):
        with_membership.add(member.principal_id)
        if (
            member.role is WorkspaceRole.ADMIN
            and member.principal_id != principal_id
            and await _usable(uow, member.principal_id, now)
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
