"""What the database alone can do with the same rows: SQLite executemany and PostgreSQL COPY."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

from wepush.server.application._import_staging import STAGE_BATCH_ROWS

from ._data import staging_tuples
from ._postgres import dsn, temporary_database

#: The shape of ``audience_import_row`` (columns, primary key, partial index), as the Service writes it.
_STAGING_DDL = (
    "CREATE TABLE audience_import_row (import_id VARCHAR(64) NOT NULL, line_number BIGINT NOT NULL, "
    "item_key VARCHAR(256), fields_json TEXT, status VARCHAR(16) NOT NULL, reason_code VARCHAR(64), "
    "reason TEXT, raw TEXT, PRIMARY KEY (import_id, line_number))",
    "CREATE INDEX ix_errors ON audience_import_row (import_id, line_number) "
    "WHERE status IN ('REJECTED', 'DUPLICATE')",
)
_INSERT = "INSERT INTO audience_import_row VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


def sqlite_executemany(csv_path: Path, work_dir: Path, *, batch: int = STAGE_BATCH_ROWS) -> tuple[int, float]:
    """Rows and seconds spent inside ``executemany`` + ``COMMIT`` (WAL, synchronous=NORMAL, and as many
    rows per transaction as the Service stages); building the tuples is not timed."""
    path = work_dir / "bare.db"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        for statement in _STAGING_DDL:
            connection.execute(statement)
        rows = 0
        spent = 0.0
        for chunk in staging_tuples(csv_path, batch):
            started = time.perf_counter()
            connection.execute("BEGIN")
            connection.executemany(_INSERT, chunk)
            connection.execute("COMMIT")
            spent += time.perf_counter() - started
            rows += len(chunk)
        return rows, spent
    finally:
        connection.close()
        path.unlink(missing_ok=True)


async def postgres_copy(csv_path: Path) -> tuple[int, float, float]:
    """Rows and seconds for one server-side COPY of the file into an unindexed table, then the seconds
    of the one step every import's commit cannot skip: ``INSERT … SELECT`` of those rows into a table
    shaped like ``audience_recipient`` (sequence numbers, JSONB fields, primary key), inside the server,
    with no staging, parsing, duplicate marking or checksum. It bounds the ratio any import through
    staging and a snapshot copy can reach against the bare COPY."""
    async with temporary_database("wepush_bench_copy") as name:
        connection = await asyncpg.connect(dsn(name))
        try:
            await connection.execute(
                "CREATE TABLE recipients (mobile text, name text, email text, city text)"
            )
            started = time.perf_counter()
            status = await connection.copy_to_table("recipients", source=csv_path, format="csv", header=True)
            spent = time.perf_counter() - started
            # Untimed: the accepted rows as the staging table holds them (key, canonical JSON text), in
            # line order already, so the copy numbers them without a sort as the commit does.
            await connection.execute(
                "CREATE TABLE staged AS SELECT row_number() OVER () AS line_number, mobile AS item_key, "
                "json_build_object('city', city, 'email', email, 'mobile', mobile, 'name', name)::text "
                "AS fields_json FROM recipients WHERE mobile IS NOT NULL"
            )
            await connection.execute(
                "CREATE TABLE snapshot_rows (snapshot_id VARCHAR(36) NOT NULL, sequence BIGINT NOT NULL, "
                "item_key VARCHAR(256) NOT NULL, fields_json JSONB NOT NULL, "
                "PRIMARY KEY (snapshot_id, sequence))"
            )
            started = time.perf_counter()
            await connection.execute(
                "INSERT INTO snapshot_rows SELECT 'snapshot', row_number() OVER (), "
                "item_key, fields_json::jsonb FROM staged"
            )
            floor = time.perf_counter() - started
        finally:
            await connection.close()
    return int(status.split()[-1]), spent, floor
