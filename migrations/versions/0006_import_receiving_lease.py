"""An upload holds a lease on its import while the file arrives.

``audience_import.receiving_until`` is renewed by the Service instance receiving the file; once it has
passed, any instance fails the import as abandoned (its instance stopped answering) instead of leaving it
STAGING until its 24-hour deadline. Uploads under way during the upgrade have none and are left alone.

Revision ID: 0006_import_receiving_lease
Revises: 0005_run_confirmation_once
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_import_receiving_lease"
down_revision: str | None = "0005_run_confirmation_once"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("audience_import", sa.Column("receiving_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("audience_import", "receiving_until")
