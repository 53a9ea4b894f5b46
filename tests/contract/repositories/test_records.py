"""Idempotency records, audit events and artifacts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import add_run, add_workspace, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    AuditEvent,
    AuditOutcome,
    IdempotencyConflict,
    IdempotencyRecord,
    PageRequest,
    RunState,
    VersionConflict,
    Workspace,
    hash_token,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


@pytest.fixture
async def workspace(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> Workspace:
    return await add_workspace(uow_factory, db_clock.now)


def _record(workspace: Workspace, clock: SteppingClock, scope: str, key: str) -> IdempotencyRecord:
    return IdempotencyRecord(
        workspace_id=workspace.id,
        scope=scope,
        key_hash=hash_token(key),
        request_fingerprint=hash_token('{"dryRun":false}'),
        response_status=202,
        response_body={"id": "run-1", "state": "PENDING"},
        resource_id="run-1",
        expires_at=clock.now + timedelta(hours=24),
        created_at=clock.now,
        updated_at=clock.now,
    )


async def test_idempotency_records_are_unique_per_scope_and_key(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    scope = f"{workspace.id}:user-1:POST /jobs/j1/runs"
    saved = _record(workspace, db_clock, scope, "manual-001")
    async with uow_factory() as uow:
        await uow.idempotency.save(saved)
        await uow.idempotency.save(
            _record(workspace, db_clock, f"{workspace.id}:user-2:POST /jobs/j1/runs", "manual-001")
        )

    with pytest.raises(IdempotencyConflict) as conflict:
        async with uow_factory() as uow:
            await uow.idempotency.save(
                replace(_record(workspace, db_clock, scope, "manual-001"), response_status=500)
            )
    assert conflict.value.code == "IDEMPOTENCY_CONFLICT"

    async with uow_factory() as uow:
        found = await uow.idempotency.find(scope, hash_token("manual-001"), db_clock.now)
        missing = await uow.idempotency.find(scope, hash_token("other"), db_clock.now)
    assert found == saved
    assert missing is None


async def test_an_expired_idempotency_key_can_be_used_again(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    first = _record(workspace, db_clock, "scope", "k")
    async with uow_factory() as uow:
        await uow.idempotency.save(first)
    db_clock.advance(timedelta(hours=25))
    second = replace(_record(workspace, db_clock, "scope", "k"), id="second-record", response_status=201)
    async with uow_factory() as uow:
        assert await uow.idempotency.find("scope", hash_token("k"), db_clock.now) is None
        await uow.idempotency.save(second)
        assert await uow.idempotency.find("scope", hash_token("k"), db_clock.now) == second
        db_clock.advance(timedelta(hours=25))
        assert await uow.idempotency.purge_expired(db_clock.now, limit=10) == 1


async def test_audit_events_are_appended_and_queried_newest_first_with_filters(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    start = db_clock.now

    def event(minutes: int, action: str, resource_id: str) -> AuditEvent:
        return AuditEvent(
            workspace_id=workspace.id,
            occurred_at=start + timedelta(minutes=minutes),
            actor_type="USER",
            actor_id="user-1",
            action=action,
            resource_type="ACCOUNT",
            resource_id=resource_id,
            outcome=AuditOutcome.SUCCESS if action != "account.delete" else AuditOutcome.DENIED,
            details={"fieldNames": ["name", "secrets.token"], "summary": "renamed"},
            trace_id="trace-1",
            created_at=start,
        )

    events = [
        event(0, "account.create", "a1"),
        event(1, "account.update", "a1"),
        event(2, "account.update", "a2"),
        event(3, "account.delete", "a1"),
    ]
    async with uow_factory() as uow:
        for e in events:
            await uow.audit.append(e)
        newest = await uow.audit.list_page(workspace.id, PageRequest(limit=2))
        older = await uow.audit.list_page(workspace.id, PageRequest(limit=2, after=newest.next_after))
        updates = await uow.audit.list_page(workspace.id, PageRequest(), action="account.update")
        about_a1 = await uow.audit.list_page(
            workspace.id, PageRequest(), resource_type="ACCOUNT", resource_id="a1"
        )
        window = await uow.audit.list_page(
            workspace.id,
            PageRequest(),
            since=start + timedelta(minutes=1),
            until=start + timedelta(minutes=3),
        )
    assert [e.id for e in newest.items + older.items] == [e.id for e in reversed(events)]
    assert not older.has_more
    assert [e.resource_id for e in updates.items] == ["a2", "a1"]
    assert [e.action for e in about_a1.items] == ["account.delete", "account.update", "account.create"]
    assert about_a1.items[0].outcome is AuditOutcome.DENIED
    assert [e.occurred_at for e in window.items] == [
        start + timedelta(minutes=2),
        start + timedelta(minutes=1),
    ]
    assert newest.items[0].details == {"fieldNames": ["name", "secrets.token"], "summary": "renamed"}


async def test_artifacts_become_ready_once_and_expire_unless_pinned_or_on_hold(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    def artifact(name: str, **extra: object) -> Artifact:
        fields: dict[str, object] = {
            "workspace_id": workspace.id,
            "owner_type": ArtifactOwnerType.RUN,
            "owner_id": "run-1",
            "artifact_type": "FAILED_ITEMS",
            "storage_key": f"workspaces/{workspace.id}/FAILED_ITEMS/2026/08/{name}",
            "content_type": "application/x-ndjson",
            "file_name": f"{name}.jsonl",
            "expires_at": db_clock.now + timedelta(days=90),
            "created_at": db_clock.now,
            "updated_at": db_clock.now,
        }
        fields.update(extra)
        return Artifact(**fields)  # type: ignore[arg-type]

    plain, pinned, held = (
        artifact("plain"),
        artifact("pinned", pinned=True),
        artifact("held", legal_hold=True),
    )
    async with uow_factory() as uow:
        ready = [
            await uow.artifacts.mark_ready(
                workspace.id,
                (await uow.artifacts.add(a)).id,
                expected_version=1,
                size_bytes=10,
                sha256="ab" * 32,
            )
            for a in (plain, pinned, held)
        ]
    assert all(a.state is ArtifactState.READY and a.version == 2 for a in ready)
    with pytest.raises(VersionConflict):
        async with uow_factory() as uow:
            await uow.artifacts.mark_ready(
                workspace.id, plain.id, expected_version=1, size_bytes=1, sha256="cd" * 32
            )

    db_clock.advance(timedelta(days=91))
    async with uow_factory() as uow:
        claimed = await uow.artifacts.claim_expired(db_clock.now, limit=10)
        again = await uow.artifacts.claim_expired(db_clock.now, limit=10)
        deleted = await uow.artifacts.mark_deleted(plain.id)
        deleted_twice = await uow.artifacts.mark_deleted(plain.id)
        listed = await uow.artifacts.list_for_owner(workspace.id, ArtifactOwnerType.RUN, "run-1")
    assert [a.id for a in claimed] == [plain.id]
    assert claimed[0].state is ArtifactState.DELETING
    assert again == []
    assert deleted.state is ArtifactState.DELETED
    assert deleted_twice == deleted
    assert [a.file_name for a in listed] == ["pinned.jsonl", "held.jsonl"]


async def test_keys_being_written_are_those_uploading_for_runs_not_yet_finished(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    live = await add_run(uow_factory, world, db_clock.now, state=RunState.PAUSED)
    done = await add_run(uow_factory, world, db_clock.now, state=RunState.SUCCEEDED)

    def artifact(run_id: str, name: str, **extra: object) -> Artifact:
        fields: dict[str, object] = {
            "workspace_id": world.workspace.id,
            "owner_type": ArtifactOwnerType.RUN,
            "owner_id": run_id,
            "artifact_type": "FAILED_ITEMS",
            "storage_key": f"workspaces/{world.workspace.id}/FAILED_ITEMS/2026/12/{name}",
            "content_type": "application/x-ndjson",
            "file_name": f"{name}.jsonl",
            "created_at": db_clock.now,
            "updated_at": db_clock.now,
        }
        fields.update(extra)
        return Artifact(**fields)  # type: ignore[arg-type]

    writing = artifact(live.id, "writing")
    async with uow_factory() as uow:
        for one in (
            writing,
            artifact(live.id, "failed", state=ArtifactState.FAILED),
            artifact(done.id, "left-behind"),
            artifact("not-a-run", "snapshot", owner_type=ArtifactOwnerType.AUDIENCE_SNAPSHOT),
        ):
            await uow.artifacts.add(one)

    async with uow_factory(read_only=True) as uow:
        assert await uow.artifacts.keys_being_written() == {writing.storage_key}
