"""The snapshot's checksum read on a second connection while the commit copies the recipients."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import cast

import pytest

from tests.contract.repositories._world import accepted, add_workspace, new_import, rejected, stage_import
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    AcceptedDigest,
    Audience,
    AudienceImport,
    AudienceImportRepository,
    ImportState,
    ImportStateConflict,
    PageRequest,
    StagedRow,
    canonical_json,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database

_AWKWARD = [
    accepted(1, "back\\slash", name="C:\\temp\\new"),
    accepted(2, "tab\tkey", name="a\tb"),
    rejected(3),
    accepted(4, "line\nkey", name="first\nsecond\r\nthird"),
    accepted(5, "ünï", name="名字 🎉", note='"quoted" \\"'),
    accepted(6, "tab\tkey", name="a repeat, marked DUPLICATE"),
]
_KEPT = [row for row in _AWKWARD if row.line_number in (1, 2, 4, 5)]


async def _staged(
    uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock, rows: list[StagedRow], workspace: str = "default"
) -> tuple[Audience, AudienceImport]:
    """An audience and a STAGED import of ``rows``, duplicates marked, all committed, as an upload leaves it."""
    workspace_ = await add_workspace(uow_factory, clock.now, workspace)
    audience = Audience(
        workspace_id=workspace_.id, name="customers", created_at=clock.now, updated_at=clock.now
    )
    audience_import = new_import(workspace_.id, audience.id, clock.now, ["mobile", "name", "note"])
    async with uow_factory() as uow:
        await uow.audiences.add(audience)
        staged = await stage_import(uow, audience_import, rows)
    return audience, staged


async def test_the_digest_read_on_another_connection_is_the_one_read_inline(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    expected = hashlib.sha256(
        "".join(f"{r.item_key}\t{canonical_json(r.fields)}\n" for r in _KEPT).encode()
    ).hexdigest()
    snapshots = []
    for concurrent in (False, True):
        audience, staged = await _staged(uow_factory, db_clock, _AWKWARD, f"concurrent-{concurrent}")
        async with uow_factory(read_only=True) as reader, uow_factory() as uow:
            digest_from = reader.audience_imports if concurrent else None
            committed = await uow.audience_imports.commit(audience, staged, digest_from=digest_from)
        async with uow_factory(read_only=True) as uow:
            recipients = await uow.audiences.list_recipients(committed.snapshot.id, PageRequest(limit=10))
        assert [(r.sequence, r.item_key) for r in recipients.items] == [
            (n, r.item_key) for n, r in enumerate(_KEPT, start=1)
        ]
        snapshots.append(committed.snapshot)

    assert [(s.checksum, s.recipient_count) for s in snapshots] == [(expected, 4), (expected, 4)]
    assert uow_factory.concurrent


async def test_a_digest_that_disagrees_with_the_rows_copied_fails_the_commit_and_leaves_nothing_behind(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    # A row staged in the committing transaction itself is copied but invisible to the other
    # connection: the same disagreement a staged row changing under the commit would cause.
    audience, staged = await _staged(uow_factory, db_clock, _AWKWARD)

    async def commit_with_a_row_staged_meanwhile() -> None:
        async with uow_factory(read_only=True) as reader, uow_factory() as uow:
            await uow.audience_imports.stage_rows(staged.id, [accepted(7, "late")])
            await uow.audience_imports.commit(audience, staged, digest_from=reader.audience_imports)

    with pytest.raises(ImportStateConflict, match="5 rows copied, 4 read for the checksum"):
        await commit_with_a_row_staged_meanwhile()

    async with uow_factory(read_only=True) as uow:
        current = await uow.audiences.get(audience.workspace_id, audience.id)
        still = await uow.audience_imports.get(audience.workspace_id, staged.id)
        snapshots = await uow.audiences.list_snapshots(audience.workspace_id, audience.id, PageRequest())
    assert current.latest_snapshot_id is None
    assert (still.state, still.version) == (ImportState.STAGED, staged.version)
    assert snapshots.items == []


class _StalledDigest:
    """A digest reader that never finishes, and records that it was stopped."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def accepted_digest(self, import_id: str) -> AcceptedDigest:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


class _FailingDigest:
    async def accepted_digest(self, import_id: str) -> AcceptedDigest:
        raise ConnectionError("the reading connection was lost")


async def test_a_commit_cancelled_while_its_digest_is_read_stops_the_reading_and_rolls_back(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience, staged = await _staged(uow_factory, db_clock, _AWKWARD)
    stalled = _StalledDigest()

    async def commit() -> None:
        async with uow_factory() as uow:
            await uow.audience_imports.commit(
                audience, staged, digest_from=cast(AudienceImportRepository, stalled)
            )

    task = asyncio.create_task(commit())
    await stalled.started.wait()
    await asyncio.sleep(0.05)  # let the copy finish and the commit wait for the digest
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert stalled.cancelled
    async with uow_factory(read_only=True) as uow:
        still = await uow.audience_imports.get(audience.workspace_id, staged.id)
    assert still.state is ImportState.STAGED


async def test_a_digest_that_fails_fails_the_commit_with_its_error(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience, staged = await _staged(uow_factory, db_clock, _AWKWARD)
    with pytest.raises(ConnectionError, match="reading connection was lost"):
        async with uow_factory() as uow:
            await uow.audience_imports.commit(
                audience, staged, digest_from=cast(AudienceImportRepository, _FailingDigest())
            )
    async with uow_factory(read_only=True) as uow:
        still = await uow.audience_imports.get(audience.workspace_id, staged.id)
    assert still.state is ImportState.STAGED


async def test_an_in_memory_database_is_one_connection_so_the_digest_is_read_inline(tmp_path: Path) -> None:
    memory = create_database("sqlite+aiosqlite://")
    on_disk = create_database(f"sqlite+aiosqlite:///{tmp_path / 'wepush.db'}")
    try:
        assert not SqlUnitOfWorkFactory(memory).concurrent
        assert SqlUnitOfWorkFactory(on_disk).concurrent
    finally:
        await memory.dispose()
        await on_disk.dispose()
