"""What the database alone can do with the same rows: SQLite executemany and PostgreSQL COPY."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

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


def sqlite_executemany(csv_path: Path, work_dir: Path, *, batch: int = 5000) -> tuple[int, float]:
    """Rows and seconds spent inside ``executemany`` + ``COMMIT`` (WAL, synchronous=NORMAL, as the Service);
    building the tuples is not timed."""
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


async def postgres_copy(csv_path: Path) -> tuple[int, float]:
    """Rows and seconds for one server-side COPY of the file into an unindexed table."""
    async with temporary_database("wepush_bench_copy") as name:
        connection = await asyncpg.connect(dsn(name))
        try:
            await connection.execute(
                "CREATE TABLE recipients (mobile text, name text, email text, city text)"
            )
            started = time.perf_counter()
            status = await connection.copy_to_table("recipients", source=csv_path, format="csv", header=True)
            spent = time.perf_counter() - started
        finally:
            await connection.close()
    return int(status.split()[-1]), spent
