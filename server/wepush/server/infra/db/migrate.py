"""Schema migrations (Alembic), usable from a source checkout and from the installed wheel.

``wepush migrate`` is the single migration job: call :func:`upgrade_database`. A Service checks
:func:`revision_of` on its own engine for readiness and refuses to serve on a schema it does not know.
The synchronous helpers start their own event loop; inside a running loop use the ``*_async`` ones.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

import wepush

from .engine import READ_ONLY_OPTION, create_database

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


class UnknownSchemaRevision(RuntimeError):
    """The database is at a revision this release's migrations do not hold: a newer release migrated it.
    Nothing here can run on that schema or take it back, so the database is left as it is."""

    def __init__(self, revision: str) -> None:
        super().__init__(
            f"the database schema is at revision {revision}, which this release does not know (a newer "
            "release migrated it); run that release, or restore the database backed up before the upgrade"
        )
        self.revision = revision


def check_revision_known(revision: str | None) -> None:
    """Raise :class:`UnknownSchemaRevision` unless ``revision`` is ``None`` (never migrated) or one of
    this release's revisions."""
    if revision is None:
        return
    known = {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if revision not in known:
        raise UnknownSchemaRevision(revision)


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration history is empty")
    return head


def _upgrade(connection: Connection, config: Config, revision: str) -> None:
    # Alembic would only say "Can't locate revision", from deep inside env.py.
    check_revision_known(_read_revision(connection))
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def upgrade_database_async(url: str, revision: str = "head") -> None:
    engine = create_database(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade, alembic_config(url), revision)
    finally:
        await engine.dispose()


def upgrade_database(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision`` (default: the newest) in one transaction."""
    asyncio.run(upgrade_database_async(url, revision))


def _read_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


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
    return asyncio.run(current_revision_async(url))


async def is_up_to_date_async(url: str) -> bool:
    return await current_revision_async(url) == head_revision()


def is_up_to_date(url: str) -> bool:
    return current_revision(url) == head_revision()


__all__ = [
    "MIGRATIONS_DIR_ENV",
    "UnknownSchemaRevision",
    "alembic_config",
    "check_revision_known",
    "current_revision",
    "current_revision_async",
    "head_revision",
    "is_up_to_date",
    "is_up_to_date_async",
    "revision_of",
    "script_location",
    "upgrade_database",
    "upgrade_database_async",
]
