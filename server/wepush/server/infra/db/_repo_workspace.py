"""Workspaces, members, API tokens and secret records."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import delete, func, select, update

from wepush.server.domain import (
    ApiToken,
    DuplicateResource,
    Keyset,
    NameAlreadyUsed,
    NotFound,
    Page,
    PageRequest,
    SecretRecord,
    VersionConflict,
    Workspace,
    WorkspaceMember,
    WorkspaceRole,
)

from ._base import RowLock, SqlRepository
from ._mapping import RowMapper
from ._tables_core import api_token, secret_record, workspace, workspace_member
from ._text_match import contains_folded

_WORKSPACE = RowMapper(Workspace, workspace)
_MEMBER = RowMapper(WorkspaceMember, workspace_member)
_TOKEN = RowMapper(ApiToken, api_token)
_SECRET = RowMapper(SecretRecord, secret_record)


def _created_key(entity: Workspace | WorkspaceMember | ApiToken) -> Keyset:
    return Keyset(entity.created_at, entity.id)


class SqlWorkspaceRepository(SqlRepository):
    async def add(self, workspace_: Workspace) -> Workspace:
        await self._insert(
            workspace, _WORKSPACE.to_values(workspace_), lambda: NameAlreadyUsed("workspace", workspace_.name)
        )
        return workspace_

    async def get(self, workspace_id: str, *, for_membership_change: bool = False) -> Workspace:
        lock: RowLock | None = "update" if for_membership_change else None
        return _WORKSPACE.from_row(await self._get_row(workspace, "workspace", workspace_id, lock=lock))

    async def find_by_name(self, name: str) -> Workspace | None:
        row = await self._one(select(workspace).where(workspace.c.name == name))
        return None if row is None else _WORKSPACE.from_row(row)

    async def list_page(
        self, page: PageRequest[Keyset], *, name: str | None = None, ids: Collection[str] | None = None
    ) -> Page[Workspace, Keyset]:
        stmt = select(workspace)
        if name:
            stmt = stmt.where(contains_folded(workspace.c.name, name))
        if ids is not None:
            stmt = stmt.where(workspace.c.id.in_(sorted(ids)))
        return await self._keyset_page(
            stmt,
            page,
            at=workspace.c.created_at,
            id_=workspace.c.id,
            build=_WORKSPACE.from_row,
            key=_created_key,
        )

    async def update(self, workspace_: Workspace) -> Workspace:
        row = await self._update_versioned(
            workspace,
            "workspace",
            workspace_.id,
            workspace_.version,
            _WORKSPACE.to_values(workspace_),
            on_duplicate=lambda: NameAlreadyUsed("workspace", workspace_.name),
        )
        return _WORKSPACE.from_row(row)

    async def add_member(self, member: WorkspaceMember) -> WorkspaceMember:
        await self._insert(
            workspace_member,
            _MEMBER.to_values(member),
            lambda: DuplicateResource("workspace_member", f"principal {member.principal_id}"),
        )
        return member

    async def find_member(self, workspace_id: str, principal_id: str) -> WorkspaceMember | None:
        row = await self._one(
            select(workspace_member).where(
                workspace_member.c.workspace_id == workspace_id,
                workspace_member.c.principal_id == principal_id,
            )
        )
        return None if row is None else _MEMBER.from_row(row)

    async def list_members(
        self, workspace_id: str, page: PageRequest[Keyset]
    ) -> Page[WorkspaceMember, Keyset]:
        return await self._keyset_page(
            select(workspace_member).where(workspace_member.c.workspace_id == workspace_id),
            page,
            at=workspace_member.c.created_at,
            id_=workspace_member.c.id,
            build=_MEMBER.from_row,
            key=_created_key,
            descending=False,
        )

    async def member_roles(
        self, workspace_id: str, principal_ids: Collection[str]
    ) -> dict[str, WorkspaceRole]:
        if not principal_ids:
            return {}
        rows = await self._all(
            select(workspace_member.c.principal_id, workspace_member.c.role).where(
                workspace_member.c.workspace_id == workspace_id,
                workspace_member.c.principal_id.in_(list(principal_ids)),
            )
        )
        return {row.principal_id: WorkspaceRole(row.role) for row in rows}

    async def memberships_of(self, principal_id: str) -> list[WorkspaceMember]:
        rows = await self._all(
            select(workspace_member)
            .where(workspace_member.c.principal_id == principal_id)
            .order_by(workspace_member.c.created_at, workspace_member.c.id)
        )
        return [_MEMBER.from_row(row) for row in rows]

    async def update_member(self, member: WorkspaceMember) -> WorkspaceMember:
        row = await self._update_versioned(
            workspace_member,
            "workspace_member",
            member.id,
            member.version,
            _MEMBER.to_values(member),
            workspace_member.c.workspace_id == member.workspace_id,
        )
        return _MEMBER.from_row(row)

    async def remove_member(self, workspace_id: str, principal_id: str) -> None:
        result = await self._conn.execute(
            delete(workspace_member).where(
                workspace_member.c.workspace_id == workspace_id,
                workspace_member.c.principal_id == principal_id,
            )
        )
        if result.rowcount == 0:
            raise NotFound("workspace_member", principal_id)


class SqlApiTokenRepository(SqlRepository):
    async def add(self, token: ApiToken) -> ApiToken:
        await self._insert(
            api_token, _TOKEN.to_values(token), lambda: DuplicateResource("api_token", "token hash")
        )
        return token

    async def get(self, token_id: str) -> ApiToken:
        return _TOKEN.from_row(await self._get_row(api_token, "api_token", token_id))

    async def find_by_hash(self, token_hash: str) -> ApiToken | None:
        row = await self._one(select(api_token).where(api_token.c.token_hash == token_hash))
        return None if row is None else _TOKEN.from_row(row)

    async def list_page(
        self, workspace_id: str | None, page: PageRequest[Keyset], *, system_admin: bool | None = None
    ) -> Page[ApiToken, Keyset]:
        owner = (
            api_token.c.workspace_id.is_(None)
            if workspace_id is None
            else api_token.c.workspace_id == workspace_id
        )
        stmt = select(api_token).where(owner)
        if system_admin is not None:
            stmt = stmt.where(api_token.c.system_admin.is_(system_admin))
        return await self._keyset_page(
            stmt,
            page,
            at=api_token.c.created_at,
            id_=api_token.c.id,
            build=_TOKEN.from_row,
            key=_created_key,
        )

    async def update(self, token: ApiToken) -> ApiToken:
        row = await self._update_versioned(
            api_token, "api_token", token.id, token.version, _TOKEN.to_values(token)
        )
        return _TOKEN.from_row(row)

    async def touch(self, token_id: str, used_at: datetime) -> None:
        await self._conn.execute(
            update(api_token).where(api_token.c.id == token_id).values(last_used_at=used_at)
        )


class SqlSecretRecordRepository(SqlRepository):
    async def add(self, record: SecretRecord) -> SecretRecord:
        await self._insert(
            secret_record,
            _SECRET.to_values(record),
            lambda: DuplicateResource(
                "secret_record", f"{record.owner_type}/{record.owner_id}/{record.name}"
            ),
        )
        return record

    async def get(self, workspace_id: str, record_id: str) -> SecretRecord:
        row = await self._get_row(
            secret_record, "secret_record", record_id, secret_record.c.workspace_id == workspace_id
        )
        return _SECRET.from_row(row)

    async def find(self, workspace_id: str, owner_type: str, owner_id: str, name: str) -> SecretRecord | None:
        row = await self._one(
            select(secret_record).where(
                secret_record.c.workspace_id == workspace_id,
                secret_record.c.owner_type == owner_type,
                secret_record.c.owner_id == owner_id,
                secret_record.c.name == name,
            )
        )
        return None if row is None else _SECRET.from_row(row)

    async def find_owned(self, owner_type: str, owner_id: str, name: str) -> SecretRecord | None:
        row = await self._one(
            select(secret_record).where(
                secret_record.c.owner_type == owner_type,
                secret_record.c.owner_id == owner_id,
                secret_record.c.name == name,
            )
        )
        return None if row is None else _SECRET.from_row(row)

    async def list_for_owner(self, workspace_id: str, owner_type: str, owner_id: str) -> list[SecretRecord]:
        rows = await self._all(
            select(secret_record)
            .where(
                secret_record.c.workspace_id == workspace_id,
                secret_record.c.owner_type == owner_type,
                secret_record.c.owner_id == owner_id,
            )
            .order_by(secret_record.c.name)
        )
        return [_SECRET.from_row(row) for row in rows]

    async def update(self, record: SecretRecord) -> SecretRecord:
        row = await self._update_versioned(
            secret_record,
            "secret_record",
            record.id,
            record.version,
            _SECRET.to_values(record),
            secret_record.c.workspace_id == record.workspace_id,
        )
        return _SECRET.from_row(row)

    async def list_not_wrapped_by(self, key_version: int, limit: int) -> list[SecretRecord]:
        rows = await self._all(
            select(secret_record)
            .where(secret_record.c.key_version != key_version)
            .order_by(secret_record.c.created_at, secret_record.c.id)
            .limit(limit)
        )
        return [_SECRET.from_row(row) for row in rows]

    async def first_wrapped_by(self, key_version: int) -> SecretRecord | None:
        rows = await self._all(
            select(secret_record)
            .where(secret_record.c.key_version == key_version)
            .order_by(secret_record.c.created_at, secret_record.c.id)
            .limit(1)
        )
        return _SECRET.from_row(rows[0]) if rows else None

    async def count_by_key_version(self) -> dict[int, int]:
        rows = await self._all(
            select(secret_record.c.key_version, func.count().label("n")).group_by(secret_record.c.key_version)
        )
        return {int(row["key_version"]): int(row["n"]) for row in rows}

    async def delete(self, workspace_id: str, record_id: str, expected_version: int) -> None:
        result = await self._conn.execute(
            delete(secret_record).where(
                secret_record.c.id == record_id,
                secret_record.c.workspace_id == workspace_id,
                secret_record.c.version == expected_version,
            )
        )
        if result.rowcount == 0:
            if await self._exists(
                secret_record.c.id == record_id, secret_record.c.workspace_id == workspace_id
            ):
                raise VersionConflict("secret_record", record_id, expected_version)
            raise NotFound("secret_record", record_id)
