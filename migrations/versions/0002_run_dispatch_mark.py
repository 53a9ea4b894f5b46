"""Run dispatch high-water mark.

``run.dispatched_through_sequence`` is raised before each recipient batch is handed to the engine. After an
executor dies, items without a recorded result at or below the mark may have been sent (UNKNOWN); items
above it were never dispatched (UNSENT). Existing runs start at 0.

Revision ID: 0002_run_dispatch_mark
Revises: 0001_initial
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_run_dispatch_mark"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run",
        sa.Column(
            "dispatched_through_sequence", sa.BigInteger(), nullable=False, server_default=sa.text("0")
        ),
    )


def downgrade() -> None:
    # SQLite (3.35+) and PostgreSQL both drop a plain column in place; no table rebuild is needed.
    op.drop_column("run", "dispatched_through_sequence")
