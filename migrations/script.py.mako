"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}

# The oldest revision whose release still runs on the schema this migration leaves. An expand migration (a
# new table, a nullable column, an index the old code does not depend on) names the revision before it, so
# that the previous release keeps serving during a rolling upgrade; a contract migration (a drop, a rename,
# a new constraint the old code can break) names itself, and runs only once the old instances are gone.
compatible_from: str = ${repr(up_revision)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
