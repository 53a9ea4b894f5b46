"""0003 reshapes the staging table in place: staged rows survive, and an open import still commits with
the checksum of its canonical rows (on PostgreSQL the JSONB documents become canonical text)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
from sqlalchemy import Insert, text

from tests.contract.repositories._world import add_workspace, new_import
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Audience, AudienceImport, ImportState, PageRequest, StagedRowStatus
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database, upgrade_database_async
from wepush.server.infra.db.tables import audience_import

EMPTY = [
    pytest.param("empty_sqlite_url", id="sqlite"),
    pytest.param("empty_postgres_url", id="postgresql", marks=pytest.mark.postgres),
]
FIRST = '{"mobile":"138001","name":"Zoë"}'
_STAGE_0002 = (
    "INSERT INTO audience_import_row (import_id, line_number, item_key, fields_json, status, reason_code, "
    "reason, raw) VALUES (:import_id, :line, :key, {fields}, :status, :code, NULL, :raw)"
)


def _import_as_0002(staged: AudienceImport) -> Insert:
    """The import row in 0002's columns (the repository writes the current ones)."""
    counts = staged.counts
    return audience_import.insert().values(
        id=staged.id,
        workspace_id=staged.workspace_id,
        audience_id=staged.audience_id,
        state=staged.state.value,
        format=staged.format.value,
        options_json=staged.options,
        total_rows=counts.total_rows,
        accepted_rows=counts.accepted_rows,
        rejected_rows=counts.rejected_rows,
        duplicate_rows=counts.duplicate_rows,
        columns_json=staged.columns,
        original_filename=staged.original_filename,
        expires_at=staged.expires_at,
        created_at=staged.created_at,
        updated_at=staged.updated_at,
        version=staged.version,
    )


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_staged_rows_of_an_open_import_survive_the_upgrade_and_commit(
    empty_url: str, request: pytest.FixtureRequest, db_clock: SteppingClock
) -> None:
    url = str(request.getfixturevalue(empty_url))
    await upgrade_database_async(url, "0002_run_dispatch_mark")
    engine = create_database(url)
    try:
        uow = SqlUnitOfWorkFactory(engine, clock=db_clock)
        now = db_clock()
        workspace = await add_workspace(uow, now)
        audience = Audience(workspace_id=workspace.id, name="people", created_at=now, updated_at=now)
        staged = new_import(workspace.id, audience.id, now, ["mobile", "name"])
        async with uow() as unit:
            await unit.audiences.add(audience)
        postgres = engine.dialect.name == "postgresql"
        stage = text(_STAGE_0002.format(fields="CAST(:fields AS JSONB)" if postgres else ":fields"))
        async with engine.begin() as connection:
            await connection.execute(_import_as_0002(staged))
            for line, key, fields, status in [
                # 0002 stored JSONB on PostgreSQL (any spacing in, its own text form out) and the
                # canonical text on SQLite.
                (2, "138001", '{"name": "Zoë", "mobile": "138001"}' if postgres else FIRST, "ACCEPTED"),
                (3, None, None, "REJECTED"),
                (4, "138002", '{"mobile":"138002","name":"Bo"}', "ACCEPTED"),
            ]:
                await connection.execute(
                    stage,
                    {
                        "import_id": staged.id,
                        "line": line,
                        "key": key,
                        "fields": fields,
                        "status": status,
                        "code": None if key else "MISSING_FIELD",
                        "raw": f"line {line}",
                    },
                )

        await upgrade_database_async(url)

        async with uow() as unit:
            page = await unit.audience_imports.list_staged(staged.id, PageRequest(limit=10))
            errors = await unit.audience_imports.list_staged(
                staged.id,
                PageRequest(limit=10),
                statuses=[StagedRowStatus.REJECTED, StagedRowStatus.DUPLICATE],
            )
            counts = await unit.audience_imports.count_staged(staged.id)
            current = await unit.audience_imports.get(workspace.id, staged.id)
            ready = await unit.audience_imports.update(
                replace(current, state=ImportState.STAGED, counts=counts)
            )
            committed = await unit.audience_imports.commit(
                await unit.audiences.get(workspace.id, audience.id), ready
            )
    finally:
        await engine.dispose()

    assert [(r.line_number, r.fields) for r in page.items] == [
        (2, {"mobile": "138001", "name": "Zoë"}),
        (3, None),
        (4, {"mobile": "138002", "name": "Bo"}),
    ]
    assert [r.line_number for r in errors.items] == [3]
    canonical = '138001\t{"mobile":"138001","name":"Zoë"}\n138002\t{"mobile":"138002","name":"Bo"}\n'
    assert committed.snapshot.recipient_count == 2
    assert committed.snapshot.checksum == hashlib.sha256(canonical.encode()).hexdigest()
