"""Ports for workspaces, members, API tokens and secret records.

Every repository works inside the caller's :class:`~wepush.server.domain.UnitOfWork` transaction and never
commits. ``update`` methods are optimistic: the entity's ``version`` is the version it was read at, the
stored row must still have it (else :class:`VersionConflict`), and the returned entity has ``version + 1``.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from ._paging import Keyset, Page, PageRequest
from ._records import SecretRecord
from ._workspace import ApiToken, Workspace, WorkspaceMember, WorkspaceRole


class WorkspaceRepository(Protocol):
    async def add(self, workspace: Workspace) -> Workspace:
        """Insert; :class:`NameAlreadyUsed` when the name is taken."""
        ...

    async def get(self, workspace_id: str, *, for_membership_change: bool = False) -> Workspace:
        """:class:`NotFound` when absent. ``for_membership_change`` holds the row until the transaction
        ends (PostgreSQL ``FOR UPDATE``), so membership changes of one workspace run one at a time and
        two admins demoting each other cannot both see the other as the remaining admin."""
        ...

    async def find_by_name(self, name: str) -> Workspace | None: ...

    async def list_page(
        self, page: PageRequest[Keyset], *, name: str | None = None, ids: Collection[str] | None = None
    ) -> Page[Workspace, Keyset]:
        """Newest first, ordered by ``(created_at, id)``. A non-empty ``name`` keeps names that contain it,
        ignoring case; ``ids`` keeps only those workspaces. Filters apply before the ``limit + 1`` read."""
        ...

    async def update(self, workspace: Workspace) -> Workspace: ...

    async def add_member(self, member: WorkspaceMember) -> WorkspaceMember:
        """:class:`DuplicateResource` when the principal is already a member."""
        ...

    async def find_member(self, workspace_id: str, principal_id: str) -> WorkspaceMember | None: ...

    async def list_members(
        self, workspace_id: str, page: PageRequest[Keyset]
    ) -> Page[WorkspaceMember, Keyset]: ...

    async def member_roles(
        self, workspace_id: str, principal_ids: Collection[str]
    ) -> dict[str, WorkspaceRole]:
        """The role of each of ``principal_ids`` that is a member of ``workspace_id`` (one page's worth)."""
        ...

    async def memberships_of(self, principal_id: str) -> list[WorkspaceMember]:
        """Every workspace role granted to ``principal_id`` (small: one row per workspace)."""
        ...

    async def update_member(self, member: WorkspaceMember) -> WorkspaceMember: ...

    async def remove_member(self, workspace_id: str, principal_id: str) -> None:
        """:class:`NotFound` when the principal is not a member."""
        ...


class ApiTokenRepository(Protocol):
    async def add(self, token: ApiToken) -> ApiToken:
        """:class:`DuplicateResource` when the hash already exists."""
        ...

    async def get(self, token_id: str) -> ApiToken: ...

    async def find_by_hash(self, token_hash: str) -> ApiToken | None:
        """The authentication lookup; returns revoked and expired tokens too (the caller decides)."""
        ...

    async def list_page(
        self, workspace_id: str | None, page: PageRequest[Keyset], *, system_admin: bool | None = None
    ) -> Page[ApiToken, Keyset]:
        """Tokens of one workspace, or the system-level tokens when ``workspace_id`` is ``None``, newest
        first; ``system_admin`` keeps only the tokens whose SYSTEM_ADMIN flag has that value."""
        ...

    async def update(self, token: ApiToken) -> ApiToken:
        """Optimistic update (revocation sets ``revoked_at``)."""
        ...

    async def touch(self, token_id: str, used_at: datetime) -> None:
        """Record use without a version bump, so authentication never conflicts with edits."""
        ...


class SecretRecordRepository(Protocol):
    async def add(self, record: SecretRecord) -> SecretRecord:
        """:class:`DuplicateResource` when (owner_type, owner_id, name) already exists."""
        ...

    async def get(self, workspace_id: str, record_id: str) -> SecretRecord: ...

    async def find(
        self, workspace_id: str, owner_type: str, owner_id: str, name: str
    ) -> SecretRecord | None: ...

    async def list_for_owner(self, workspace_id: str, owner_type: str, owner_id: str) -> list[SecretRecord]:
        """Ordered by name."""
        ...

    async def find_owned(self, owner_type: str, owner_id: str, name: str) -> SecretRecord | None:
        """The record of this owner and name in whichever workspace holds it (the three are unique
        together): how the Service finds its own keys, and with them its default workspace."""
        ...

    async def update(self, record: SecretRecord) -> SecretRecord: ...

    async def delete(self, workspace_id: str, record_id: str, expected_version: int) -> None: ...

    async def list_not_wrapped_by(self, key_version: int, limit: int) -> list[SecretRecord]:
        """Up to ``limit`` records of any workspace whose DEK is wrapped by another master key version
        (what a rotation still has to re-wrap), oldest first."""
        ...

    async def count_by_key_version(self) -> dict[int, int]:
        """How many records each master key version wraps, over every workspace."""
        ...

    async def first_wrapped_by(self, key_version: int) -> SecretRecord | None:
        """The oldest record of any workspace whose DEK ``key_version`` wraps, or ``None``: opening it
        proves a key ring holds that very key, not just a key under the same version number."""
        ...
