"""FAILED artifacts another one replaced: left out of a run's listing on request, and never offered for
writing again; the ones nothing replaced, of runs that have ended, are (until they expire)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.contract.repositories._world import World, add_run, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    Keyset,
    PageRequest,
    Run,
    RunState,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory

OUTCOMES = ["SUCCEEDED_ITEMS", "FAILED_ITEMS", "UNKNOWN_ITEMS", "UNSENT_ITEMS", "RESULTS_EXPORT"]


@pytest.fixture
async def world(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> World:
    return await build_world(uow_factory, db_clock.now)


class Files:
    """Adds a run's artifacts one second apart, so that their order is the order they were added in."""

    def __init__(self, uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock, run: Run) -> None:
        self._uow = uow_factory
        self._clock = clock
        self._run = run

    async def add(
        self, artifact_type: str, state: ArtifactState, *, expires_in: timedelta = timedelta(days=1)
    ) -> Artifact:
        now = self._clock.advance()
        artifact = Artifact(
            workspace_id=self._run.workspace_id,
            owner_type=ArtifactOwnerType.RUN,
            owner_id=self._run.id,
            artifact_type=artifact_type,
            state=state,
            storage_key=f"runs/{self._run.id}/{now.timestamp():.0f}.jsonl",
            content_type="application/x-ndjson",
            file_name="f.jsonl",
            expires_at=now + expires_in,
            created_at=now,
            updated_at=now,
        )
        async with self._uow() as uow:
            return await uow.artifacts.add(artifact)


async def _unreplaced(uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    after: Keyset | None = None
    while True:
        async with uow_factory(read_only=True) as uow:
            page = await uow.artifacts.list_unreplaced_failures(
                OUTCOMES, clock.now, PageRequest(limit=limit, after=after)
            )
        pages.append([a.id for a in page.items])
        if page.next_after is None:
            return pages
        after = page.next_after


async def test_failures_nothing_replaced_of_ended_runs_are_offered_for_writing_again(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    done = Files(
        uow_factory, db_clock, await add_run(uow_factory, world, db_clock.now, state=RunState.PARTIAL)
    )
    live = Files(
        uow_factory, db_clock, await add_run(uow_factory, world, db_clock.now, state=RunState.RUNNING)
    )
    # Written again READY, or being written again.
    await done.add("SUCCEEDED_ITEMS", ArtifactState.FAILED)
    await done.add("SUCCEEDED_ITEMS", ArtifactState.READY)
    await done.add("FAILED_ITEMS", ArtifactState.FAILED)
    await done.add("FAILED_ITEMS", ArtifactState.UPLOADING)
    # Nothing replaced it.
    lost_export = await done.add("RESULTS_EXPORT", ArtifactState.FAILED)
    # A file deleted before it failed stands for nothing; one written after it, expired since, does.
    await done.add("UNKNOWN_ITEMS", ArtifactState.DELETED)
    lost_unknown = await done.add("UNKNOWN_ITEMS", ArtifactState.FAILED)
    await done.add("UNSENT_ITEMS", ArtifactState.FAILED)
    await done.add("UNSENT_ITEMS", ArtifactState.DELETED)
    # Not asked for, expired, or of a run still executing.
    await done.add("RUN_LOG", ArtifactState.FAILED)
    await done.add("SKIPPED_ITEMS", ArtifactState.FAILED, expires_in=timedelta(seconds=5))
    await live.add("SUCCEEDED_ITEMS", ArtifactState.FAILED)
    db_clock.advance(timedelta(seconds=10))

    pages = await _unreplaced(uow_factory, db_clock, limit=1)

    assert pages == [[lost_export.id], [lost_unknown.id]]


async def test_a_listing_may_leave_out_the_failures_another_file_replaced(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now, state=RunState.SUCCEEDED)
    files = Files(uow_factory, db_clock, run)
    await files.add("SUCCEEDED_ITEMS", ArtifactState.FAILED)
    lost_log = await files.add("RUN_LOG", ArtifactState.FAILED)
    rebuilt = await files.add("SUCCEEDED_ITEMS", ArtifactState.READY)
    await files.add("RESULTS_EXPORT", ArtifactState.FAILED)
    await files.add("RESULTS_EXPORT", ArtifactState.DELETED)
    visible = [ArtifactState.UPLOADING, ArtifactState.READY, ArtifactState.FAILED]

    async def listed(*, without_replaced_failures: bool, limit: int = 10) -> list[str]:
        ids: list[str] = []
        after: Keyset | None = None
        while True:
            async with uow_factory(read_only=True) as uow:
                page = await uow.artifacts.list_page(
                    run.workspace_id,
                    ArtifactOwnerType.RUN,
                    run.id,
                    PageRequest(limit=limit, after=after),
                    states=visible,
                    without_replaced_failures=without_replaced_failures,
                )
            # Filtered by the database: a page is full unless it is the last.
            assert len(page.items) == limit or page.next_after is None
            ids += [a.id for a in page.items]
            if page.next_after is None:
                return ids
            after = page.next_after

    everything = await listed(without_replaced_failures=False)
    kept = await listed(without_replaced_failures=True, limit=1)

    assert len(everything) == 4
    assert kept == [lost_log.id, rebuilt.id]
