"""One confirmation starts one run.

``run.confirmation_digest`` holds the SHA-256 of the confirmation token that started a real send (a
resend included), unique within the workspace, so a second start with another Idempotency-Key but the
same confirmation (a double click in a client that makes a new key per click) cannot send to the whole
audience again. Dry runs and runs started before this revision have none (NULL never collides).

Revision ID: 0005_run_confirmation_once
Revises: 0004_live_names_unique
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_run_confirmation_once"
down_revision: str | None = "0004_live_names_unique"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run", sa.Column("confirmation_digest", sa.String(64), nullable=True))
    op.create_index(
        "uq_run_workspace_id_confirmation_digest", "run", ["workspace_id", "confirmation_digest"], unique=True
    )


def downgrade() -> None:
    op.drop_index("uq_run_workspace_id_confirmation_digest", table_name="run")
    op.drop_column("run", "confirmation_digest")
