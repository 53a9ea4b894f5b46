"""Builders for a small, valid world of resources; every row is written through the repositories."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from wepush.server.domain import (
    Account,
    Audience,
    AudienceImport,
    AudienceSnapshot,
    ImportFormat,
    ImportState,
    Job,
    Message,
    MessageRevision,
    Run,
    RunState,
    SecretRecord,
    StagedRow,
    StagedRowStatus,
    UnitOfWork,
    UnitOfWorkFactory,
    Workspace,
)


@dataclass(frozen=True)
class World:
    workspace: Workspace
    account: Account
    message: Message
    revision: MessageRevision
    audience: Audience
    snapshot: AudienceSnapshot
    job: Job


async def add_workspace(uow_factory: UnitOfWorkFactory, now: datetime, name: str = "default") -> Workspace:
    workspace = Workspace(name=name, created_at=now, updated_at=now)
    async with uow_factory() as uow:
        await uow.workspaces.add(workspace)
    return workspace


def new_account(workspace_id: str, now: datetime, name: str = "http-main") -> Account:
    return Account(
        workspace_id=workspace_id,
        name=name,
        provider_id="wepush.http",
        provider_version="1.0.0",
        config={"baseUrl": "https://api.example.com", "auth": {"token": {"$secret": "http-token"}}},
        schema_version="1",
        created_at=now,
        updated_at=now,
    )


def new_import(workspace_id: str, audience_id: str, now: datetime, columns: list[str]) -> AudienceImport:
    return AudienceImport(
        workspace_id=workspace_id,
        audience_id=audience_id,
        state=ImportState.STAGING,
        format=ImportFormat.CSV,
        options={"hasHeader": True, "delimiter": ","},
        columns=columns,
        original_filename="people.csv",
        expires_at=now + timedelta(days=1),
        created_at=now,
        updated_at=now,
    )


def accepted(line: int, key: str, **fields: Any) -> StagedRow:
    return StagedRow(
        line_number=line,
        status=StagedRowStatus.ACCEPTED,
        item_key=key,
        fields={"mobile": key, **fields},
        raw=f"{key},{fields}",
    )


def rejected(line: int, reason_code: str = "MISSING_FIELD") -> StagedRow:
    return StagedRow(
        line_number=line,
        status=StagedRowStatus.REJECTED,
        reason_code=reason_code,
        reason="mobile is required",
        raw=",",
    )


async def stage_import(
    uow: UnitOfWork, audience_import: AudienceImport, rows: list[StagedRow]
) -> AudienceImport:
    """Add ``audience_import``, stage ``rows``, mark duplicates and count, as an upload leaves it (STAGED)."""
    await uow.audience_imports.add(audience_import)
    await uow.audience_imports.stage_rows(audience_import.id, rows)
    await uow.audience_imports.mark_duplicates(audience_import.id)
    counts = await uow.audience_imports.count_staged(audience_import.id)
    return await uow.audience_imports.update(
        replace(audience_import, state=ImportState.STAGED, counts=counts)
    )


async def commit_audience(
    uow_factory: UnitOfWorkFactory, audience: Audience, rows: list[StagedRow], now: datetime
) -> tuple[Audience, AudienceSnapshot]:
    """Stage ``rows``, mark duplicates and commit; returns the updated audience and its new snapshot."""
    async with uow_factory() as uow:
        staged = await stage_import(
            uow, new_import(audience.workspace_id, audience.id, now, ["mobile", "name"]), rows
        )
        current = await uow.audiences.get(audience.workspace_id, audience.id)
        committed = await uow.audience_imports.commit(current, staged)
    return committed.audience, committed.snapshot


async def build_world(uow_factory: UnitOfWorkFactory, now: datetime, name: str = "default") -> World:
    workspace = await add_workspace(uow_factory, now, name)
    account = new_account(workspace.id, now)
    message = Message(
        workspace_id=workspace.id, name="greeting", provider_id="wepush.http", created_at=now, updated_at=now
    )
    revision = MessageRevision.of(
        workspace_id=workspace.id, message_id=message.id, revision=1, content={"path": "/notify"}, now=now
    )
    audience = Audience(workspace_id=workspace.id, name="customers", created_at=now, updated_at=now)
    async with uow_factory() as uow:
        await uow.accounts.add(account)
        await uow.messages.add(message, revision)
        await uow.audiences.add(audience)
    audience, snapshot = await commit_audience(
        uow_factory,
        audience,
        [accepted(1, "13800000001", name="Ann"), accepted(2, "13800000002", name="Bo")],
        now,
    )
    job = Job(
        workspace_id=workspace.id,
        name="weekly",
        account_id=account.id,
        message_id=message.id,
        message_revision=1,
        audience_snapshot_id=snapshot.id,
        policies={"concurrency": {"min": 1, "max": 10, "target": 5}},
        created_at=now,
        updated_at=now,
    )
    async with uow_factory() as uow:
        await uow.jobs.add(job)
    return World(workspace, account, message, revision, audience, snapshot, job)


def new_run(world: World, now: datetime, **overrides: Any) -> Run:
    fields: dict[str, Any] = {
        "workspace_id": world.workspace.id,
        "job_id": world.job.id,
        "provider_id": "wepush.http",
        "account_id": world.account.id,
        "message_id": world.message.id,
        "message_revision": world.revision.revision,
        "audience_snapshot_id": world.snapshot.id,
        "snapshot": {"provider": {"id": "wepush.http", "version": "1.0.0"}, "accountVersion": 1},
        "recipient_count": world.snapshot.recipient_count,
        "state": RunState.PENDING,
        "created_at": now,
        "updated_at": now,
    }
    fields.update(overrides)
    return Run(**fields)


async def add_run(uow_factory: UnitOfWorkFactory, world: World, now: datetime, **overrides: Any) -> Run:
    run = new_run(world, now, **overrides)
    async with uow_factory() as uow:
        await uow.runs.add(run)
    return run


def secret_record(workspace_id: str, now: datetime, **changes: Any) -> SecretRecord:
    """An account's sealed secret with opaque placeholder bytes (repositories never look inside)."""
    record = SecretRecord(
        workspace_id=workspace_id,
        owner_type="ACCOUNT",
        owner_id="account-1",
        name="token",
        ciphertext=b"\x00\x01ciphertext\xff",
        nonce=b"n" * 12,
        encrypted_dek=b"d" * 48,
        dek_nonce=b"m" * 12,
        algorithm="AES-256-GCM",
        key_version=1,
        created_at=now,
        updated_at=now,
    )
    return replace(record, **changes)
