"""Duplicate marking on PostgreSQL refreshes the staging table's statistics without waiting on whoever else
is refreshing them: ANALYZE's lock is also held by another upload's ANALYZE (until its transaction ends)
and by a VACUUM of the table, which may take as long as the table is large."""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._world import accepted, add_workspace, new_import
from tests.fixtures.db import LOCK_WAIT_DEADLINE_S, SteppingClock
from wepush.server.domain import Audience, AudienceImport, PageRequest, StagedRowStatus
from wepush.server.infra.db import SqlUnitOfWorkFactory

pytestmark = pytest.mark.postgres
SKIPPED = "IMPORT_STAGING_ANALYZE_SKIPPED"


async def _staged(uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock, keys: list[str]) -> AudienceImport:
    """An import whose staged accepted rows carry ``keys`` in line order."""
    workspace = await add_workspace(uow_factory, clock.now)
    audience = Audience(workspace_id=workspace.id, name="people", created_at=clock.now, updated_at=clock.now)
    staged = new_import(workspace.id, audience.id, clock.now, ["mobile"])
    async with uow_factory() as uow:
        await uow.audiences.add(audience)
        await uow.audience_imports.add(staged)
        await uow.audience_imports.stage_rows(staged.id, [accepted(n, key) for n, key in enumerate(keys, 1)])
    return staged


async def test_duplicates_are_marked_while_another_session_holds_the_analyze_lock(
    pg_engine: AsyncEngine,
    pg_uow: SqlUnitOfWorkFactory,
    db_clock: SteppingClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    staged = await _staged(pg_uow, db_clock, ["a", "b", "a", "b"])

    async def mark() -> tuple[int, list[int], str]:
        async with pg_uow() as uow:
            marked = await uow.audience_imports.mark_duplicates(staged.id, among={"a", "b"})
            page = await uow.audience_imports.list_staged(
                staged.id, PageRequest(limit=10), statuses=[StagedRowStatus.DUPLICATE]
            )
            # The short wait applies to ANALYZE alone, not to the rest of the upload's transaction.
            connection = uow._conn
            assert connection is not None
            timeout = await connection.scalar(text("SELECT current_setting('lock_timeout')"))
        return marked, [row.line_number for row in page.items], str(timeout)

    caplog.set_level(logging.INFO, logger="wepush.server.imports")
    async with pg_engine.connect() as vacuuming:
        await vacuuming.execute(text("LOCK TABLE audience_import_row IN SHARE UPDATE EXCLUSIVE MODE"))
        # A deadlock detector, not a timing: without the bounded wait this never finishes while held.
        marked, lines, timeout = await asyncio.wait_for(mark(), LOCK_WAIT_DEADLINE_S)
        await vacuuming.rollback()

    assert (marked, lines) == (2, [3, 4])
    assert timeout == "0"
    assert [r.event for r in caplog.records if hasattr(r, "event")] == [SKIPPED]


async def test_duplicates_refresh_the_statistics_when_nobody_else_holds_the_lock(
    pg_engine: AsyncEngine,
    pg_uow: SqlUnitOfWorkFactory,
    db_clock: SteppingClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    staged = await _staged(pg_uow, db_clock, [f"k{n % 3}" for n in range(1, 10)])

    caplog.set_level(logging.INFO, logger="wepush.server.imports")
    async with pg_uow() as uow:
        marked = await uow.audience_imports.mark_duplicates(staged.id, among={"k0", "k1", "k2"})
    async with pg_engine.connect() as probe:
        analysed = await probe.scalar(
            text(
                "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'audience_import_row'"
            )
        )

    assert marked == 6
    assert analysed is True
    assert not [r for r in caplog.records if getattr(r, "event", "") == SKIPPED]
