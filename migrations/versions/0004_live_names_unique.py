"""Live names unique per workspace for messages, audiences and jobs, as for accounts.

The contract says a name is unique per resource type within a workspace; until now only accounts were
held to it. A partial unique index over the live (not soft-deleted) rows makes it a database rule, so two
concurrent creates cannot both win. Databases that already hold two live resources of one name keep the
oldest name as it is and give each later one a suffix with its id, so the upgrade never fails on them.

Revision ID: 0004_live_names_unique
Revises: 0003_import_staging_bulk
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from alembic import op

revision: str = "0004_live_names_unique"
down_revision: str | None = "0003_import_staging_bulk"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES: Final = ("message", "audience", "job")
_LIVE: Final = "deleted_at IS NULL"
_NAME_LENGTH: Final = 200


def upgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        _rename_repeated_names(bind, table)
        op.create_index(
            f"uq_{table}_workspace_id_name_live",
            table,
            ["workspace_id", "name"],
            unique=True,
            sqlite_where=sa.text(_LIVE),
            postgresql_where=sa.text(_LIVE),
        )


def _rename_repeated_names(bind: sa.Connection, table: str) -> None:
    rows = bind.execute(
        sa.text(
            f"SELECT id, workspace_id, name FROM {table} WHERE {_LIVE} "  # noqa: S608 - fixed table names
            "ORDER BY workspace_id, name, created_at, id"
        )
    ).all()
    seen: set[tuple[str, str]] = set()
    rename = sa.text(f"UPDATE {table} SET name = :name WHERE id = :id")  # noqa: S608 - fixed table names
    for row_id, workspace_id, name in rows:
        if (workspace_id, name) in seen:
            suffix = f" ({row_id})"
            bind.execute(rename, {"id": row_id, "name": name[: _NAME_LENGTH - len(suffix)] + suffix})
        seen.add((workspace_id, name))


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"uq_{table}_workspace_id_name_live", table_name=table)
