"""Repository methods the run executor needs: the dispatch high-water mark, the recipients of a resend
run, and deletions a cleanup pass left unfinished. Same contract on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import World, accepted, add_run, build_world, commit_audience
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    ItemResult,
    ItemState,
    NotFound,
    PageRequest,
    RunState,
    RunStateConflict,
    RunTrigger,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


@pytest.fixture
async def world(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> World:
    return await build_world(uow_factory, db_clock.now)


async def test_dispatch_mark_starts_at_zero_and_only_ever_rises(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        initial = await uow.runs.dispatch_mark(run.workspace_id, run.id)
        raised = await uow.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=500)
        kept = await uow.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=200)
    async with uow_factory(read_only=True) as uow:
        stored = await uow.runs.dispatch_mark(run.workspace_id, run.id)
        reread = await uow.runs.get(run.workspace_id, run.id)

    assert (initial, raised, kept, stored) == (0, 500, 500, 500)
    assert reread.version == run.version  # telemetry, like progress: no optimistic-lock bump


async def test_dispatch_mark_is_refused_once_the_run_is_terminal_and_unknown_runs_are_not_found(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        cancelling = await uow.runs.transition(
            run.workspace_id, run.id, expected_version=run.version, target=RunState.CANCELLING
        )
        await uow.runs.transition(
            run.workspace_id, run.id, expected_version=cancelling.version, target=RunState.CANCELLED
        )

    async with uow_factory() as uow:
        with pytest.raises(RunStateConflict) as conflict:
            await uow.runs.mark_dispatched(run.workspace_id, run.id, through_sequence=1)
    async with uow_factory() as uow:
        with pytest.raises(NotFound):
            await uow.runs.mark_dispatched(run.workspace_id, "no-such-run", through_sequence=1)
        with pytest.raises(NotFound):
            await uow.runs.dispatch_mark(run.workspace_id, "no-such-run")
        with pytest.raises(NotFound):
            await uow.runs.dispatch_mark("another-workspace", run.id)

    assert conflict.value.current_state is RunState.CANCELLED


async def test_a_resend_run_reads_only_the_recipients_of_its_retry_set_in_sequence_order(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    audience, snapshot = await commit_audience(
        uow_factory,
        world.audience,
        [accepted(n, f"1390000000{n}", name=f"R{n}") for n in range(1, 6)],
        db_clock.now,
    )
    source = await add_run(uow_factory, world, db_clock.now, audience_snapshot_id=snapshot.id)
    outcomes = {1: ItemState.SUCCEEDED, 2: ItemState.FAILED, 3: ItemState.SUCCEEDED, 4: ItemState.UNSENT}
    async with uow_factory() as uow:
        await uow.run_items.record_results(
            world.workspace.id,
            source.id,
            [ItemResult(item_id=f"i-{n}", sequence=n, state=s, attempt=1) for n, s in outcomes.items()]
            + [ItemResult(item_id="i-5", sequence=5, state=ItemState.UNKNOWN, attempt=1)],
        )
    resend = await add_run(
        uow_factory,
        world,
        db_clock.advance(),
        audience_snapshot_id=snapshot.id,
        source_run_id=source.id,
        trigger=RunTrigger.RESEND,
    )
    async with uow_factory() as uow:
        await uow.run_items.create_retry_set(
            resend.id, source.id, [ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT]
        )

    async with uow_factory(read_only=True) as uow:
        first = await uow.run_items.list_retry_recipients(resend.id, snapshot.id, PageRequest(limit=2))
        rest = await uow.run_items.list_retry_recipients(
            resend.id, snapshot.id, PageRequest(limit=2, after=first.next_after)
        )
        other_snapshot = await uow.run_items.list_retry_recipients(
            resend.id, world.snapshot.id, PageRequest()
        )
        plain_run = await uow.run_items.list_retry_recipients(source.id, snapshot.id, PageRequest())

    assert audience.latest_snapshot_id == snapshot.id
    assert [(r.sequence, r.item_key, r.fields["name"]) for r in first.items + rest.items] == [
        (2, "13900000002", "R2"),
        (4, "13900000004", "R4"),
        (5, "13900000005", "R5"),
    ]
    assert first.has_more
    assert not rest.has_more
    # Sequences only match within the snapshot the run was built from.
    assert [r.sequence for r in other_snapshot.items] == [2]
    assert plain_run.items == []


async def test_unfinished_deletions_are_listed_until_confirmed(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)

    def artifact(name: str) -> Artifact:
        return Artifact(
            workspace_id=world.workspace.id,
            owner_type=ArtifactOwnerType.RUN,
            owner_id=run.id,
            artifact_type="FAILED_ITEMS",
            storage_key=f"runs/{run.id}/{name}.jsonl",
            content_type="application/x-ndjson",
            file_name=f"{name}.jsonl",
            expires_at=db_clock.now + timedelta(days=1),
            created_at=db_clock.now,
            updated_at=db_clock.now,
        )

    async with uow_factory() as uow:
        for name in ("old", "new", "kept"):
            added = await uow.artifacts.add(artifact(name))
            await uow.artifacts.mark_ready(
                added.workspace_id, added.id, expected_version=added.version, size_bytes=1, sha256="0" * 64
            )
    async with uow_factory() as uow:
        before = await uow.artifacts.list_deleting(limit=10)
    db_clock.advance(timedelta(days=2))
    async with uow_factory() as uow:
        owned = await uow.artifacts.list_for_owner(world.workspace.id, ArtifactOwnerType.RUN, run.id)
        kept = next(a for a in owned if a.file_name == "kept.jsonl")
        await uow.artifacts.update(replace(kept, pinned=True))
        claimed = await uow.artifacts.claim_expired(db_clock.now, limit=10)
    async with uow_factory() as uow:
        pending = await uow.artifacts.list_deleting(limit=10)
        limited = await uow.artifacts.list_deleting(limit=1)
        await uow.artifacts.mark_deleted(pending[0].id)
        after_one = await uow.artifacts.list_deleting(limit=10)

    assert before == []
    assert sorted(a.file_name for a in claimed) == ["new.jsonl", "old.jsonl"]
    assert sorted(a.file_name for a in pending) == ["new.jsonl", "old.jsonl"]
    assert all(a.state is ArtifactState.DELETING for a in pending)
    assert len(limited) == 1
    assert [a.id for a in after_one] == [pending[1].id]
