"""A schema says which releases run on it, so the previous release keeps serving during a rolling
upgrade (the ADR: expand, migrate, contract; adjacent releases coexist), on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection

from tests.fixtures.releases import NEWER_REVISION, migrate_with, newer_release
from wepush.server.infra.db import (
    SchemaFit,
    UnknownSchemaRevision,
    create_database,
    current_revision_async,
    head_revision,
    schema_state_async,
    upgrade_database_async,
)
from wepush.server.infra.db._compatibility import declared_compatible_from
from wepush.server.infra.db.migrate import script_location
from wepush.server.infra.db.tables import schema_compatibility


async def _recorded(url: str) -> list[tuple[str, str]] | None:
    """The rows of ``schema_compatibility``, or ``None`` when the table is not there."""
    engine = create_database(url)

    def read(connection: Connection) -> list[tuple[str, str]] | None:
        if not inspect(connection).has_table("schema_compatibility"):
            return None
        rows = connection.execute(
            select(schema_compatibility.c.revision, schema_compatibility.c.compatible_from)
        )
        return [(str(r), str(c)) for r, c in rows]

    try:
        async with engine.connect() as connection:
            return await connection.run_sync(read)
    finally:
        await engine.dispose()


async def _workspace_columns(url: str) -> set[str]:
    engine = create_database(url)
    try:
        async with engine.connect() as connection:
            columns = await connection.run_sync(lambda c: inspect(c).get_columns("workspace"))
            return {column["name"] for column in columns}
    finally:
        await engine.dispose()


def test_every_migration_of_this_release_declares_a_revision_at_or_before_itself() -> None:
    scripts = ScriptDirectory(str(script_location()))
    declared = {s.revision: declared_compatible_from(scripts, s.revision) for s in scripts.walk_revisions()}

    # Before 0007 nothing declared anything: each revision stands for itself (the strict default).
    assert declared["0006_import_receiving_lease"] == "0006_import_receiving_lease"
    assert declared["0007_schema_compatibility"] == "0006_import_receiving_lease"


async def test_every_migration_run_records_what_the_schema_runs_with(database_url: str) -> None:
    assert await _recorded(database_url) == [(head_revision(), "0006_import_receiving_lease")]

    await migrate_with(database_url, script_location(), "0006_import_receiving_lease", downgrade=True)
    assert await _recorded(database_url) is None  # the table went with its revision

    await upgrade_database_async(database_url)
    assert await _recorded(database_url) == [(head_revision(), "0006_import_receiving_lease")]
    state = await schema_state_async(database_url)
    assert (state.fit, state.usable, state.describe()) == (SchemaFit.CURRENT, True, "at head")


async def test_this_release_runs_on_a_schema_a_newer_release_declared_fit_for_it(
    database_url: str, tmp_path: Path
) -> None:
    newer = newer_release(tmp_path, compatible_from=head_revision())

    await migrate_with(database_url, newer)  # the newer release's migration job

    assert await _recorded(database_url) == [(NEWER_REVISION, head_revision())]
    state = await schema_state_async(database_url)
    assert (state.revision, state.fit, state.compatible_from, state.usable) == (
        NEWER_REVISION,
        SchemaFit.AHEAD_COMPATIBLE,
        head_revision(),
        True,
    )
    assert state.describe() == (
        f"at revision {NEWER_REVISION} of a newer release, which runs releases from revision "
        f"{head_revision()} on"
    )
    # This release's own migration job, run again (a redeploy of an instance), leaves the schema alone.
    again = await upgrade_database_async(database_url)
    assert (again.before, again.after) == (state, state)
    assert await current_revision_async(database_url) == NEWER_REVISION
    assert "newer_release_note" in await _workspace_columns(database_url)


@pytest.mark.parametrize(
    "declared", [None, NEWER_REVISION, "0098_unknown_to_this_release"], ids=["nothing", "itself", "unknown"]
)
async def test_a_schema_a_newer_release_did_not_declare_fit_for_this_one_is_refused_and_left_alone(
    database_url: str, tmp_path: Path, declared: str | None
) -> None:
    newer = newer_release(tmp_path, compatible_from=declared)
    if declared == "0098_unknown_to_this_release":
        # Only an ancestor can be declared; the newer release's own check stops that migration, so the
        # row is written by hand, as another tool might.
        await migrate_with(database_url, newer_release(tmp_path / "valid", compatible_from=None))
        engine = create_database(database_url)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text("UPDATE schema_compatibility SET compatible_from = :declared"),
                    {"declared": declared},
                )
        finally:
            await engine.dispose()
    else:
        await migrate_with(database_url, newer)

    state = await schema_state_async(database_url)
    assert (state.fit, state.usable) == (SchemaFit.AHEAD_INCOMPATIBLE, False)
    with pytest.raises(
        UnknownSchemaRevision, match=f"at revision {NEWER_REVISION}, which this release does not"
    ):
        await upgrade_database_async(database_url)
    assert await current_revision_async(database_url) == NEWER_REVISION


async def test_a_migration_that_declares_a_revision_after_itself_is_rolled_back(
    database_url: str, tmp_path: Path
) -> None:
    newer = newer_release(tmp_path, compatible_from="0100_not_an_ancestor")

    with pytest.raises(RuntimeError, match="compatible_from '0100_not_an_ancestor' is not this revision"):
        await migrate_with(database_url, newer)

    # One transaction: the schema and what it says about itself stay as they were.
    assert await current_revision_async(database_url) == head_revision()
    assert "newer_release_note" not in await _workspace_columns(database_url)
    assert await _recorded(database_url) == [(head_revision(), "0006_import_receiving_lease")]
