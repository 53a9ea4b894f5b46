"""Schema migrations (Alembic), usable from a source checkout and from the installed wheel.

``wepush migrate`` is the single migration job: call :func:`upgrade_database`. A Service checks
:func:`schema_state_of` on its own engine for readiness and refuses to serve on a schema it does not know,
unless the newer release that migrated it declared this one able to run on it (``_compatibility``).
The synchronous helpers start their own event loop; inside a running loop use the ``*_async`` ones.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

import wepush

from ._compatibility import SchemaFit, SchemaState, UnknownSchemaRevision, read_schema_state
from .engine import READ_ONLY_OPTION, create_database, run_database_task

MIGRATIONS_DIR_ENV = "WEPUSH_MIGRATIONS_DIR"


class _DialectNotices(logging.Filter):
    """Drops the two lines Alembic logs each time it looks at a connection ("Context impl SQLiteImpl.",
    "Will assume non-transactional DDL."): readiness reads the revision on every probe, and the lines
    worth reading ("Running upgrade 0004 -> 0005") are kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(("Context impl ", "Will assume ")))


logging.getLogger("alembic.runtime.migration").addFilter(_DialectNotices())


def _checkout_migrations() -> Path:
    """Where ``migrations/`` sits when this module runs from a source checkout."""
    return Path(__file__).resolve().parents[5] / "migrations"


def script_location() -> Path:
    """The Alembic script directory: ``$WEPUSH_MIGRATIONS_DIR``, the checkout's ``migrations/``, or the
    wheel's ``wepush/_migrations``, whichever exists first.

    The checkout wins over the packaged copy because an editable install also copies ``_migrations`` into
    site-packages at install time, and that copy goes stale as soon as a new revision is written."""
    candidates: list[Path] = []
    override = os.environ.get(MIGRATIONS_DIR_ENV)
    if override:
        candidates.append(Path(override))
    candidates.append(_checkout_migrations())
    candidates += [Path(entry) / "_migrations" for entry in wepush.__path__]
    for candidate in candidates:
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("the Alembic migrations directory was not found; set " + MIGRATIONS_DIR_ENV)


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if url is not None:
        # ConfigParser interpolation: a literal "%" (URL-encoded passwords) must be doubled.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def schema_state(connection: Connection) -> SchemaState:
    """Where the schema behind ``connection`` stands to this release's migrations."""
    return read_schema_state(connection, str(script_location()))


def require_usable(state: SchemaState) -> None:
    """Raise :class:`UnknownSchemaRevision` for a schema a newer release migrated and did not declare
    this release able to run on."""
    if state.fit is SchemaFit.AHEAD_INCOMPATIBLE:
        assert state.revision is not None
        raise UnknownSchemaRevision(state.revision)


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration history is empty")
    return head


@dataclass(frozen=True, slots=True)
class Migration:
    """Where a migration job found the schema, and where it left it."""

    before: SchemaState
    after: SchemaState

    def describe(self) -> str:
        """What the job did, in one line for the operator."""
        if self.before.fit is SchemaFit.AHEAD_COMPATIBLE:
            return f"nothing to do; the database schema is {self.before.describe()}"
        if self.before.revision == self.after.revision:
            return "database schema is up to date; nothing to do"
        if self.before.fit is SchemaFit.NOT_MIGRATED:
            return f"database schema created at revision {self.after.revision}"
        return f"database schema upgraded from revision {self.before.revision} to {self.after.revision}"


def _upgrade(connection: Connection, config: Config, revision: str) -> Migration:
    before = schema_state(connection)
    # Alembic would only say "Can't locate revision", from deep inside env.py.
    require_usable(before)
    if before.fit is SchemaFit.AHEAD_COMPATIBLE:
        # A newer release's migration job ran first (a rolling upgrade): nothing here can move that schema,
        # and it was declared fit for this release as it is.
        return Migration(before, before)
    config.attributes["connection"] = connection
    command.upgrade(config, revision)
    return Migration(before, schema_state(connection))


async def upgrade_database_async(url: str, revision: str = "head") -> Migration:
    engine = create_database(url)
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(_upgrade, alembic_config(url), revision)
    finally:
        await engine.dispose()


def upgrade_database(url: str, revision: str = "head") -> Migration:
    """Migrate the database at ``url`` to ``revision`` (default: the newest) in one transaction, and say
    where the schema stands afterwards. A schema a newer release migrated is left as it is: raised as
    :class:`UnknownSchemaRevision` unless that release declared this one able to run on it."""
    return run_database_task(upgrade_database_async(url, revision))


def _read_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def schema_state_of(engine: AsyncEngine) -> SchemaState:
    """:func:`schema_state` on one of ``engine``'s pooled connections (readiness, start-up)."""
    async with engine.connect() as connection:
        connection = await connection.execution_options(**{READ_ONLY_OPTION: True})
        return await connection.run_sync(schema_state)


async def schema_state_async(url: str) -> SchemaState:
    engine = create_database(url)
    try:
        return await schema_state_of(engine)
    finally:
        await engine.dispose()


async def revision_of(engine: AsyncEngine) -> str | None:
    """The revision the database behind ``engine`` is at, read on one of its pooled connections."""
    async with engine.connect() as connection:
        connection = await connection.execution_options(**{READ_ONLY_OPTION: True})
        return await connection.run_sync(_read_revision)


async def current_revision_async(url: str) -> str | None:
    engine = create_database(url)
    try:
        return await revision_of(engine)
    finally:
        await engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database is at; ``None`` for a database never migrated."""
    return run_database_task(current_revision_async(url))


async def is_up_to_date_async(url: str) -> bool:
    return await current_revision_async(url) == head_revision()


def is_up_to_date(url: str) -> bool:
    return current_revision(url) == head_revision()


__all__ = [
    "MIGRATIONS_DIR_ENV",
    "Migration",
    "SchemaFit",
    "SchemaState",
    "UnknownSchemaRevision",
    "alembic_config",
    "current_revision",
    "current_revision_async",
    "head_revision",
    "is_up_to_date",
    "is_up_to_date_async",
    "require_usable",
    "revision_of",
    "schema_state",
    "schema_state_async",
    "schema_state_of",
    "script_location",
    "upgrade_database",
    "upgrade_database_async",
]
