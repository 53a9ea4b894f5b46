"""Staging rows shaped for bulk loading.

An import writes every line of the file into ``audience_import_row``; the shape decides how fast. The
foreign key to ``audience_import`` is dropped (it was checked for every staged row; staging rows are
only written and discarded through their import). The two secondary indexes, maintained for every row,
give way to one partial index over the rejected and duplicate rows, the only rows looked up apart from
the primary key's line order. ``fields_json`` becomes the canonical JSON text on PostgreSQL too (it was
JSONB), so the snapshot checksum hashes it as stored and the commit casts it once into the recipients'
JSONB. The recipients' unique index on ``(snapshot_id, item_key)`` is dropped: the duplicate marking
already leaves one accepted row per item key, the commit copies only those, and nothing looks recipients
up by key; the index cost a random-order insertion for every recipient of every snapshot. Its foreign
key to the snapshot goes too: recipients are written only by the commit that creates their snapshot, in
the same transaction, and the check ran for every copied row.

Revision ID: 0003_import_staging_bulk
Revises: 0002_run_dispatch_mark
Create Date: 2026-12-01
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_import_staging_bulk"
down_revision: str | None = "0002_run_dispatch_mark"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "audience_import_row"
_ERRORS = "status IN ('REJECTED', 'DUPLICATE')"
_OLD_INDEXES = (
    ("ix_audience_import_row_import_id_status_line_number", ["import_id", "status", "line_number"]),
    ("ix_audience_import_row_import_id_item_key", ["import_id", "item_key"]),
)
_FK = "fk_audience_import_row_import_id_audience_import"
_RECIPIENT_KEY = "uq_audience_recipient_snapshot_id_item_key"
_RECIPIENT_FK = "fk_audience_recipient_snapshot_id_audience_snapshot"


def upgrade() -> None:
    with op.batch_alter_table("audience_recipient") as batch:
        batch.drop_constraint(_RECIPIENT_KEY, type_="unique")
        batch.drop_constraint(_RECIPIENT_FK, type_="foreignkey")
    for name, _ in _OLD_INDEXES:
        op.drop_index(name, table_name=_TABLE)
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(_FK, _TABLE, type_="foreignkey")
        op.alter_column(
            _TABLE,
            "fields_json",
            type_=sa.Text(),
            existing_type=postgresql.JSONB(),
            postgresql_using="fields_json::text",
        )
        _canonicalise_open_imports()
    else:
        # SQLite drops a foreign key only by rebuilding the table; batch mode copies the rows over.
        with op.batch_alter_table(_TABLE, recreate="always") as batch:
            batch.drop_constraint(_FK, type_="foreignkey")
    op.create_index(
        "ix_audience_import_row_errors",
        _TABLE,
        ["import_id", "line_number"],
        sqlite_where=sa.text(_ERRORS),
        postgresql_where=sa.text(_ERRORS),
    )


def _canonicalise_open_imports() -> None:
    """JSONB's text form is not the canonical one (it puts spaces after ``:`` and ``,``). Rows of imports
    that may still be committed are rewritten canonically, since the snapshot checksum hashes them as
    stored; other imports' rows are only ever parsed again."""
    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            "SELECT r.import_id, r.line_number, r.fields_json FROM audience_import_row r "
            "JOIN audience_import i ON i.id = r.import_id "
            "WHERE i.state IN ('STAGING', 'STAGED') AND r.fields_json IS NOT NULL"
        )
    ).all()
    update = sa.text(
        "UPDATE audience_import_row SET fields_json = :fields "
        "WHERE import_id = :import_id AND line_number = :line_number"
    )
    changed = [
        {"import_id": import_id, "line_number": line, "fields": _canonical(text)}
        for import_id, line, text in rows
        if _canonical(text) != text
    ]
    for start in range(0, len(changed), 1000):
        bind.execute(update, changed[start : start + 1000])


def _canonical(text: str) -> str:
    # The same form as wepush.server.domain.canonical_json (migrations do not import the application).
    return json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def downgrade() -> None:
    op.drop_index("ix_audience_import_row_errors", table_name=_TABLE)
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            _TABLE,
            "fields_json",
            type_=postgresql.JSONB(),
            existing_type=sa.Text(),
            postgresql_using="fields_json::jsonb",
        )
        op.create_foreign_key(_FK, _TABLE, "audience_import", ["import_id"], ["id"])
    else:
        with op.batch_alter_table(_TABLE, recreate="always") as batch:
            batch.create_foreign_key(_FK, "audience_import", ["import_id"], ["id"])
    for name, columns in _OLD_INDEXES:
        op.create_index(name, _TABLE, columns)
    with op.batch_alter_table("audience_recipient") as batch:
        batch.create_unique_constraint(_RECIPIENT_KEY, ["snapshot_id", "item_key"])
        batch.create_foreign_key(_RECIPIENT_FK, "audience_snapshot", ["snapshot_id"], ["id"])
