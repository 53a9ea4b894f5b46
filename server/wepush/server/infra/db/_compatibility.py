"""Which schemas this release can run on, so that adjacent releases coexist during a rolling upgrade.

The ADR's migrations are expand, migrate, contract: the migration job brings the schema to the new release
before the new instances start, while instances of the previous release still serve. An *expand* migration
(a table, a nullable column, an index) leaves the schema usable by the releases before it; a *contract*
one (a drop, a rename, a new constraint) does not. A release cannot know what a newer release's migrations
did, so the schema says it itself: each migration script may declare ``compatible_from``, the oldest
revision whose release still runs on the schema it leaves (by default its own revision: nothing older).
After every migration run the declaration of the revision the schema is at is written into
``schema_compatibility``; a release that finds an unknown (newer) revision there runs on it only when the
declared revision is one of its own.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import delete, insert, inspect, select
from sqlalchemy.engine import Connection

from ._tables_schema import schema_compatibility


class SchemaFit(enum.Enum):
    """How the database's schema stands to this release's migrations."""

    NOT_MIGRATED = "NOT_MIGRATED"
    BEHIND = "BEHIND"
    CURRENT = "CURRENT"
    AHEAD_COMPATIBLE = "AHEAD_COMPATIBLE"
    """A newer release migrated it, and declared this release able to run on the result."""
    AHEAD_INCOMPATIBLE = "AHEAD_INCOMPATIBLE"


@dataclass(frozen=True)
class SchemaState:
    revision: str | None
    fit: SchemaFit
    compatible_from: str | None = None
    """For a schema ahead of this release: the oldest revision whose release runs on it, as its migrations
    declared (``None`` when they declared nothing this release can read)."""

    @property
    def usable(self) -> bool:
        """This release may serve on the schema as it is."""
        return self.fit in (SchemaFit.CURRENT, SchemaFit.AHEAD_COMPATIBLE)

    def describe(self) -> str:
        """One line for readiness and logs."""
        if self.fit is SchemaFit.NOT_MIGRATED:
            return "the schema has never been migrated"
        if self.fit is SchemaFit.CURRENT:
            return "at head"
        if self.fit is SchemaFit.BEHIND:
            return f"at revision {self.revision}, behind this release; run 'wepush migrate'"
        if self.fit is SchemaFit.AHEAD_COMPATIBLE:
            return (
                f"at revision {self.revision} of a newer release, which runs releases from revision "
                f"{self.compatible_from} on"
            )
        return f"at revision {self.revision} of a newer release, which this release cannot run on"


class UnknownSchemaRevision(RuntimeError):
    """The database is at a revision this release's migrations do not hold (a newer release migrated it)
    and that release did not declare this one able to run on it. Nothing here can run on that schema or
    take it back, so the database is left as it is."""

    def __init__(self, revision: str) -> None:
        super().__init__(
            f"the database schema is at revision {revision}, which this release does not know (a newer "
            "release migrated it); run that release, or restore the database backed up before the upgrade"
        )
        self.revision = revision


@functools.cache
def _history(script_location: str) -> tuple[str, frozenset[str]]:
    """This release's head revision and every revision it holds (read once: the scripts ship with it)."""
    scripts = ScriptDirectory(script_location)
    head = scripts.get_current_head()
    if head is None:
        raise RuntimeError("the migration history is empty")
    return head, frozenset(script.revision for script in scripts.walk_revisions())


def read_schema_state(connection: Connection, script_location: str) -> SchemaState:
    """Where the schema behind ``connection`` stands to the migrations at ``script_location``. The
    compatibility row is read only for a schema ahead of this release, so probes on a current schema
    cost one query."""
    head, known = _history(script_location)
    revision = MigrationContext.configure(connection).get_current_revision()
    if revision is None:
        return SchemaState(None, SchemaFit.NOT_MIGRATED)
    if revision == head:
        return SchemaState(revision, SchemaFit.CURRENT)
    if revision in known:
        return SchemaState(revision, SchemaFit.BEHIND)
    declared = _declared_compatibility(connection, revision)
    fit = SchemaFit.AHEAD_COMPATIBLE if declared in known else SchemaFit.AHEAD_INCOMPATIBLE
    return SchemaState(revision, fit, declared)


def _declared_compatibility(connection: Connection, revision: str) -> str | None:
    if not inspect(connection).has_table(schema_compatibility.name):
        return None
    # Matched on the revision: a row some other tool left behind for another revision says nothing.
    row = connection.execute(
        select(schema_compatibility.c.compatible_from).where(schema_compatibility.c.revision == revision)
    ).first()
    return None if row is None else str(row[0])


def declared_compatible_from(scripts: ScriptDirectory, revision: str) -> str:
    """What the script of ``revision`` declares (its own revision when it declares nothing); refuses a
    declaration that is not the revision itself or one of its ancestors, a migration author's mistake."""
    script = scripts.get_revision(revision)
    if script is None:
        raise RuntimeError(f"no migration script for revision {revision}")
    declared = getattr(script.module, "compatible_from", None) or revision
    ancestors = {s.revision for s in scripts.iterate_revisions(revision, "base")}
    if declared not in ancestors:
        raise RuntimeError(
            f"migration {revision}: compatible_from {declared!r} is not this revision or one before it"
        )
    return str(declared)


def record_schema_compatibility(connection: Connection, scripts: ScriptDirectory) -> None:
    """Write the declaration of the revision the schema is now at (after an upgrade, a downgrade or a
    stamp), in the migration's transaction. Revisions before the table existed write nothing."""
    revision = MigrationContext.configure(connection).get_current_revision()
    if revision is None or not inspect(connection).has_table(schema_compatibility.name):
        return
    compatible_from = declared_compatible_from(scripts, revision)
    connection.execute(delete(schema_compatibility))
    connection.execute(
        insert(schema_compatibility).values(revision=revision, compatible_from=compatible_from)
    )
