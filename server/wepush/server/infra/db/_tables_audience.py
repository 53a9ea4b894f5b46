"""Tables: audiences, imports with their staging rows, snapshots and recipients.

Staging rows and recipients are bulk child rows keyed by their parent and position, written with
``executemany`` and ``INSERT … SELECT``; they carry no id or version of their own.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from ._metadata import ID_LENGTH, audit_columns, id_column, metadata, ref_column, workspace_column
from ._types import JSON_DOCUMENT, CanonicalJSON, UtcDateTime

ITEM_KEY_LENGTH = 256
#: The staged rows an error page lists. Queries repeat this text with literal values, so that both
#: databases can prove it and use the partial index (SQLite cannot with bound parameters).
STAGED_ERRORS_PREDICATE = "status IN ('REJECTED', 'DUPLICATE')"

audience = Table(
    "audience",
    metadata,
    id_column(),
    workspace_column(),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    # Soft reference: the snapshot row is created after the audience and never deleted while referenced.
    ref_column("latest_snapshot_id", None, nullable=True),
    Column("latest_revision", Integer, nullable=False),
    Column("recipient_count", BigInteger, nullable=False),
    Column("deleted_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(
        "uq_audience_workspace_id_name_live",
        "workspace_id",
        "name",
        unique=True,
        sqlite_where=text("deleted_at IS NULL"),
        postgresql_where=text("deleted_at IS NULL"),
    ),
    Index(None, "workspace_id", "created_at"),
)

audience_import = Table(
    "audience_import",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("audience_id", "audience.id"),
    Column("state", String(16), nullable=False),
    Column("format", String(8), nullable=False),
    Column("options_json", JSON_DOCUMENT, nullable=False),
    Column("total_rows", BigInteger, nullable=False),
    Column("accepted_rows", BigInteger, nullable=False),
    Column("rejected_rows", BigInteger, nullable=False),
    Column("duplicate_rows", BigInteger, nullable=False),
    Column("columns_json", JSON_DOCUMENT, nullable=False),
    Column("original_filename", String(255), nullable=True),
    Column("failure_reason", Text, nullable=True),
    ref_column("snapshot_id", None, nullable=True),
    Column("expires_at", UtcDateTime(), nullable=False),
    # A heartbeat, not a change: renewing it leaves version and updated_at alone.
    Column("receiving_until", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(None, "audience_id", "created_at"),
    Index(None, "state", "expires_at"),
)

# Staging rows are temporary bulk data written a million at a time, so they carry only what the import
# needs: the primary key (line order, for previews, error pages and the commit's copy) and a partial index
# over the few rejected and duplicate rows (error pages). No foreign key: it would be checked per row,
# and staging rows are only ever written and discarded through their import. The fields are canonical
# JSON text on every database, hashed as stored for the snapshot checksum.
audience_import_row = Table(
    "audience_import_row",
    metadata,
    Column("import_id", String(ID_LENGTH), nullable=False),
    Column("line_number", BigInteger, nullable=False),
    Column("item_key", String(ITEM_KEY_LENGTH), nullable=True),
    Column("fields_json", CanonicalJSON(), nullable=True),
    Column("status", String(16), nullable=False),
    Column("reason_code", String(64), nullable=True),
    Column("reason", Text, nullable=True),
    Column("raw", Text, nullable=True),
    PrimaryKeyConstraint("import_id", "line_number"),
    Index(
        "ix_audience_import_row_errors",
        "import_id",
        "line_number",
        sqlite_where=text(STAGED_ERRORS_PREDICATE),
        postgresql_where=text(STAGED_ERRORS_PREDICATE),
    ),
)

audience_snapshot = Table(
    "audience_snapshot",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("audience_id", "audience.id"),
    Column("revision", Integer, nullable=False),
    Column("recipient_count", BigInteger, nullable=False),
    Column("fields_json", JSON_DOCUMENT, nullable=False),
    Column("checksum", String(64), nullable=False),
    ref_column("source_import_id", "audience_import.id", nullable=True),
    *audit_columns(),
    UniqueConstraint("audience_id", "revision"),
)

audience_recipient = Table(
    "audience_recipient",
    metadata,
    # Recipients are written only by an import's commit, in the same transaction that creates their
    # snapshot, and snapshots are never deleted apart from their recipients; a foreign key would be
    # checked for each of the million rows of a large commit.
    Column("snapshot_id", String(ID_LENGTH), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("item_key", String(ITEM_KEY_LENGTH), nullable=False),
    Column("fields_json", JSON_DOCUMENT, nullable=False),
    # One row per item key is guaranteed by the import (every later occurrence is marked DUPLICATE
    # before the commit copies the accepted rows), so no unique index is maintained for it.
    PrimaryKeyConstraint("snapshot_id", "sequence"),
)

__all__ = [
    "ITEM_KEY_LENGTH",
    "STAGED_ERRORS_PREDICATE",
    "audience",
    "audience_import",
    "audience_import_row",
    "audience_recipient",
    "audience_snapshot",
]
