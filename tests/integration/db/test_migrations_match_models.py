"""The Alembic history produces exactly the models' schema, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, text
from sqlalchemy.engine import Connection

from tests.fixtures.releases import migrate_with
from wepush.server.infra.db import (
    create_database,
    current_revision_async,
    head_revision,
    is_up_to_date_async,
    metadata,
    upgrade_database_async,
)
from wepush.server.infra.db.migrate import script_location

EMPTY = [
    pytest.param("empty_sqlite_url", id="sqlite"),
    pytest.param("empty_postgres_url", id="postgresql", marks=pytest.mark.postgres),
]

# index name → words its WHERE clause must contain (each database prints predicates its own way)
PARTIAL_UNIQUE_INDEXES = {
    "uq_agent_lease_run_id_active": ("STATE", "'ACTIVE'"),
    "uq_account_workspace_id_name_live": ("DELETED_AT", "IS NULL"),
    "uq_message_workspace_id_name_live": ("DELETED_AT", "IS NULL"),
    "uq_audience_workspace_id_name_live": ("DELETED_AT", "IS NULL"),
    "uq_job_workspace_id_name_live": ("DELETED_AT", "IS NULL"),
}


def _diff(connection: Connection, target: MetaData) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, target))


async def _diff_against(url: str, target: MetaData) -> list[Any]:
    engine = create_database(url)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_diff, target)
    finally:
        await engine.dispose()


async def _partial_index_definitions(url: str) -> dict[str, str]:
    engine = create_database(url)
    try:
        async with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                rows = await connection.execute(
                    text("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
                )
            else:
                rows = await connection.execute(text("SELECT indexname, indexdef FROM pg_indexes"))
            return {name: sql for name, sql in rows if name in PARTIAL_UNIQUE_INDEXES}
    finally:
        await engine.dispose()


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_a_fresh_database_migrated_to_head_has_no_differences_from_the_models(
    empty_url: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(empty_url))
    assert await current_revision_async(url) is None
    assert not await is_up_to_date_async(url)

    await upgrade_database_async(url)

    assert await current_revision_async(url) == head_revision() == "0007_schema_compatibility"
    assert await is_up_to_date_async(url)
    assert await _diff_against(url, metadata) == []


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_the_comparison_notices_a_schema_that_differs(
    empty_url: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(empty_url))
    await upgrade_database_async(url)
    drifted = MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(drifted)
    Table("unexpected", drifted, Column("id", Integer, primary_key=True))

    differences = await _diff_against(url, drifted)

    assert [d[0] for d in differences] == ["add_table"]


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_partial_unique_indexes_are_real_partial_indexes_on_both_databases(
    empty_url: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(empty_url))
    await upgrade_database_async(url)

    definitions = await _partial_index_definitions(url)

    assert set(definitions) == set(PARTIAL_UNIQUE_INDEXES)
    for name, words in PARTIAL_UNIQUE_INDEXES.items():
        definition = definitions[name].upper()
        assert definition.startswith("CREATE UNIQUE INDEX")
        _, _, predicate = definition.partition(" WHERE ")
        assert all(word in predicate for word in words), definition


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_downgrade_to_base_removes_everything_and_upgrade_restores_it(
    empty_url: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(empty_url))
    await upgrade_database_async(url)

    await migrate_with(url, script_location(), "base", downgrade=True)
    remaining = await _diff_against(url, metadata)
    assert len([d for d in remaining if d[0] == "add_table"]) == len(metadata.tables)
    assert {d[0] for d in remaining} <= {"add_table", "add_index"}

    await upgrade_database_async(url)
    assert await _diff_against(url, metadata) == []
