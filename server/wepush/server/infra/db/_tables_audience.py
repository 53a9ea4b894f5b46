"""Tables: audiences, imports with their staging rows, snapshots and recipients.

Staging rows and recipients are bulk child rows keyed by their parent and position, written with
``executemany`` and ``INSERT … SELECT``; they carry no id or version of their own.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from ._metadata import ID_LENGTH, audit_columns, id_column, metadata, ref_column, workspace_column
from ._types import JSON_DOCUMENT, UtcDateTime

ITEM_KEY_LENGTH = 256

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
    *audit_columns(),
    Index(None, "audience_id", "created_at"),
    Index(None, "state", "expires_at"),
)

audience_import_row = Table(
    "audience_import_row",
    metadata,
    Column("import_id", String(ID_LENGTH), ForeignKey("audience_import.id"), nullable=False),
    Column("line_number", BigInteger, nullable=False),
    Column("item_key", String(ITEM_KEY_LENGTH), nullable=True),
    Column("fields_json", JSON_DOCUMENT, nullable=True),
    Column("status", String(16), nullable=False),
    Column("reason_code", String(64), nullable=True),
    Column("reason", Text, nullable=True),
    Column("raw", Text, nullable=True),
    PrimaryKeyConstraint("import_id", "line_number"),
    Index(None, "import_id", "status", "line_number"),
    Index(None, "import_id", "item_key"),
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
    Column("snapshot_id", String(ID_LENGTH), ForeignKey("audience_snapshot.id"), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("item_key", String(ITEM_KEY_LENGTH), nullable=False),
    Column("fields_json", JSON_DOCUMENT, nullable=False),
    PrimaryKeyConstraint("snapshot_id", "sequence"),
    UniqueConstraint("snapshot_id", "item_key"),
)

__all__ = [
    "ITEM_KEY_LENGTH",
    "audience",
    "audience_import",
    "audience_import_row",
    "audience_recipient",
    "audience_snapshot",
]
