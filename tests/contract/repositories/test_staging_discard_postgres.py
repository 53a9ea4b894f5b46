"""Discarding an interrupted upload's staged rows on PostgreSQL walks the primary key once per batch.

An upload a crash interrupted never refreshes the staging table's statistics (the finished upload does,
when it marks duplicates), so the instance's start-up clean-up runs on statistics that say the table is
empty. ``line_number IN (SELECT … LIMIT n)`` was then planned as a nested loop rescanning the subquery for
every staged row: minutes for a few hundred thousand rows, and the instance was not ready meanwhile."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._world import accepted, add_workspace, new_import
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Audience
from wepush.server.infra.db import SqlUnitOfWorkFactory

pytestmark = pytest.mark.postgres
ROWS = 3_000
BATCH = 1_000


async def test_the_batches_of_a_discard_are_range_deletes_on_stale_statistics(
    pg_engine: AsyncEngine, pg_uow: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(pg_uow, db_clock.now)
    audience = Audience(
        workspace_id=workspace.id, name="people", created_at=db_clock.now, updated_at=db_clock.now
    )
    staged = new_import(workspace.id, audience.id, db_clock.now, ["mobile"])
    async with pg_engine.connect() as admin:
        # The statistics of an empty table, as a crashed upload leaves them.
        await admin.execute(text("ANALYZE audience_import_row"))
        await admin.commit()
    async with pg_uow() as uow:
        await uow.audiences.add(audience)
        await uow.audience_imports.add(staged)
        await uow.audience_imports.stage_rows(staged.id, [accepted(n, f"k{n}") for n in range(1, ROWS + 1)])

    deletes: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM AUDIENCE_IMPORT_ROW"):
            deletes.append((statement, parameters))

    event.listen(pg_engine.sync_engine, "before_cursor_execute", capture)
    try:
        async with pg_uow() as uow:
            first = await uow.audience_imports.discard_staging_rows(staged.id, BATCH)
    finally:
        event.remove(pg_engine.sync_engine, "before_cursor_execute", capture)
    [(statement, parameters)] = deletes
    async with pg_engine.connect() as probe:
        raw = await probe.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        plan = "\n".join(row[0] for row in await driver.fetch(f"EXPLAIN {statement}", *parameters))
        await probe.rollback()
        remaining = await probe.scalar(
            text("SELECT count(*) FROM audience_import_row WHERE import_id = :id"), {"id": staged.id}
        )

    assert first == BATCH
    assert remaining == ROWS - BATCH
    # One range over the primary key: no subquery for the planner to join back (whichever way it picks
    # on the statistics at hand), no nested loop.
    assert "Subquery" not in plan
    assert "Nested Loop" not in plan
    assert "pk_audience_import_row" in plan
