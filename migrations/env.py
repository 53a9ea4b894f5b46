"""Alembic environment for the Service schema, on SQLite (aiosqlite) and PostgreSQL (asyncpg).

Programmatic callers (``wepush.server.infra.db.migrate``) pass an open connection in
``config.attributes["connection"]``. The ``alembic`` command line builds its own async engine from
``-x url=…``, ``$WEPUSH_DATABASE_URL`` or ``sqlalchemy.url`` in ``alembic.ini``.
"""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from wepush.server.infra.db._compatibility import record_schema_compatibility
from wepush.server.infra.db.engine import create_database
from wepush.server.infra.db.tables import metadata

config = context.config


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("WEPUSH_DATABASE_URL")
    url = url or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=… or set WEPUSH_DATABASE_URL")
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        # SQLite cannot ALTER most things in place; batch mode rebuilds tables for later revisions.
        render_as_batch=connection.dialect.name == "sqlite",
    )


#: The transaction-level advisory lock a migration holds on PostgreSQL: a fixed number nothing else in the
#: Service uses (it spells "wepushmg").
_MIGRATION_LOCK_KEY = 0x7765707573686D67


def _run_on(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Two jobs started at once (a retried deployment job, a second release script) both found the
            # schema unmigrated and created the same tables; the second failed on a unique violation. Queued
            # here until the first commits, it reads the revision afterwards (read committed: every
            # statement sees what committed before it) and finds nothing left to do.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        context.run_migrations()
        # In the same transaction, so the schema and what it says about itself never disagree.
        record_schema_compatibility(connection, context.script)


async def _run_with_own_engine() -> None:
    engine = create_database(_url())
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_on)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        asyncio.run(_run_with_own_engine())
    else:
        _run_on(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
