"""Workspaces, members, API tokens and encrypted secret records."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import add_workspace, secret_record
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    ApiToken,
    DuplicateResource,
    NameAlreadyUsed,
    NotFound,
    PageRequest,
    VersionConflict,
    WorkspaceMember,
    WorkspaceRole,
    hash_token,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def test_workspace_names_are_unique_and_members_hold_one_role_each(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now, name="default")
    with pytest.raises(NameAlreadyUsed):
        await add_workspace(uow_factory, db_clock.now, name="default")

    member = WorkspaceMember(
        workspace_id=workspace.id,
        principal_id="user-1",
        role=WorkspaceRole.OPERATOR,
        created_at=db_clock.now,
        updated_at=db_clock.now,
    )
    async with uow_factory() as uow:
        await uow.workspaces.add_member(member)
    with pytest.raises(DuplicateResource):
        async with uow_factory() as uow:
            await uow.workspaces.add_member(replace(member, id="second-membership", role=WorkspaceRole.ADMIN))

    async with uow_factory() as uow:
        promoted = await uow.workspaces.update_member(replace(member, role=WorkspaceRole.ADMIN))
        found = await uow.workspaces.find_member(workspace.id, "user-1")
        roles = await uow.workspaces.member_roles(workspace.id, ["user-1", "user-2"])
        elsewhere = await uow.workspaces.member_roles("another-workspace", ["user-1"])
        nobody = await uow.workspaces.member_roles(workspace.id, [])
        by_name = await uow.workspaces.find_by_name("default")
        members = await uow.workspaces.list_members(workspace.id, PageRequest())
        await uow.workspaces.remove_member(workspace.id, "user-1")
        with pytest.raises(NotFound):
            await uow.workspaces.remove_member(workspace.id, "user-1")
    assert found == promoted
    assert (roles, elsewhere, nobody) == ({"user-1": WorkspaceRole.ADMIN}, {}, {})
    assert promoted.role is WorkspaceRole.ADMIN
    assert by_name == workspace
    assert [m.principal_id for m in members.items] == ["user-1"]


async def test_api_tokens_are_found_by_hash_revoked_optimistically_and_touched_without_conflicts(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    token = ApiToken(
        workspace_id=workspace.id,
        name="ci",
        token_hash=hash_token("wpt_secret"),
        token_prefix="wpt_secr",
        role=WorkspaceRole.OPERATOR,
        principal_id="user-1",
        expires_at=db_clock.now + timedelta(days=30),
        created_at=db_clock.now,
        updated_at=db_clock.now,
    )
    system = replace(
        token, id="system-token", workspace_id=None, token_hash=hash_token("sys"), system_admin=True
    )
    async with uow_factory() as uow:
        await uow.api_tokens.add(token)
        await uow.api_tokens.add(system)
    db_clock.advance()
    async with uow_factory() as uow:
        await uow.api_tokens.touch(token.id, db_clock.now)
        found = await uow.api_tokens.find_by_hash(hash_token("wpt_secret"))
        assert found is not None
        revoked = await uow.api_tokens.update(replace(found, revoked_at=db_clock.now))
        workspace_tokens = await uow.api_tokens.list_page(workspace.id, PageRequest())
        system_tokens = await uow.api_tokens.list_page(None, PageRequest())
    assert found.last_used_at == db_clock.now
    assert found.version == 1
    assert not revoked.is_usable(db_clock.now)
    assert found.is_usable(db_clock.now)
    assert [t.id for t in workspace_tokens.items] == [token.id]
    assert [t.system_admin for t in system_tokens.items] == [True]
    assert "wpt_secret" not in repr(found)
    assert found.token_hash not in repr(found)


async def test_secret_records_are_unique_per_owner_and_name_and_keep_their_bytes(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    record = secret_record(workspace.id, db_clock.now)
    async with uow_factory() as uow:
        await uow.secret_records.add(record)
        await uow.secret_records.add(replace(record, id="password-record", name="password"))
    with pytest.raises(DuplicateResource):
        async with uow_factory() as uow:
            await uow.secret_records.add(replace(record, id="clash"))

    async with uow_factory() as uow:
        found = await uow.secret_records.find(workspace.id, "ACCOUNT", "account-1", "token")
        assert found == record
        # Owner and name alone find it, in whichever workspace it is (the Service finds its keys so).
        assert await uow.secret_records.find_owned("ACCOUNT", "account-1", "token") == record
        assert await uow.secret_records.find_owned("ACCOUNT", "account-2", "token") is None
        rotated = await uow.secret_records.update(
            replace(record, ciphertext=b"new", record_version=2, key_version=2)
        )
        names = [
            r.name for r in await uow.secret_records.list_for_owner(workspace.id, "ACCOUNT", "account-1")
        ]
        with pytest.raises(VersionConflict):
            await uow.secret_records.delete(workspace.id, record.id, expected_version=1)
        await uow.secret_records.delete(workspace.id, record.id, expected_version=rotated.version)
        with pytest.raises(NotFound):
            await uow.secret_records.get(workspace.id, record.id)
    assert (rotated.ciphertext, rotated.record_version, rotated.version) == (b"new", 2, 2)
    assert names == ["password", "token"]
    assert "ciphertext" not in repr(record)
