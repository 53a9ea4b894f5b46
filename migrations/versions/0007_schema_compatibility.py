"""The schema says which releases can run on it: ``schema_compatibility``.

One row, rewritten after every migration run (``migrations/env.py``), holds the revision the schema is at
and the oldest revision whose release still runs on it, as that revision's script declares in
``compatible_from``. During a rolling upgrade the instances of the previous release read it to keep
serving on a schema an expand migration moved ahead of them (see ``wepush.server.infra.db._compatibility``).

Revision ID: 0007_schema_compatibility
Revises: 0006_import_receiving_lease
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_schema_compatibility"
down_revision: str | None = "0006_import_receiving_lease"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only a table 0006's release never reads: that release runs on this schema unchanged.
compatible_from: str = "0006_import_receiving_lease"


def upgrade() -> None:
    op.create_table(
        "schema_compatibility",
        sa.Column("revision", sa.String(64), nullable=False),
        sa.Column("compatible_from", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f("pk_schema_compatibility")),
    )


def downgrade() -> None:
    op.drop_table("schema_compatibility")
