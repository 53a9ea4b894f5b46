"""Tables: artifacts, audit events and idempotency records."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, String, Table, UniqueConstraint

from ._metadata import audit_columns, id_column, metadata, ref_column, workspace_column
from ._types import JSON_DOCUMENT, UtcDateTime

artifact = Table(
    "artifact",
    metadata,
    id_column(),
    workspace_column(),
    Column("owner_type", String(32), nullable=False),
    ref_column("owner_id", None),
    Column("artifact_type", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("storage_key", String(1024), nullable=False),
    Column("size_bytes", BigInteger, nullable=True),
    Column("sha256", String(64), nullable=True),
    Column("content_type", String(128), nullable=False),
    Column("file_name", String(255), nullable=False),
    Column("pinned", Boolean, nullable=False),
    Column("legal_hold", Boolean, nullable=False),
    Column("expires_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(None, "owner_type", "owner_id"),
    Index(None, "state", "expires_at"),
)

# Audit outlives workspaces and also records events without one (a failed login), hence no foreign key.
audit_event = Table(
    "audit_event",
    metadata,
    id_column(),
    workspace_column(nullable=True, foreign_key=False),
    Column("occurred_at", UtcDateTime(), nullable=False),
    Column("actor_type", String(32), nullable=False),
    Column("actor_id", String(128), nullable=False),
    Column("action", String(128), nullable=False),
    Column("resource_type", String(64), nullable=False),
    Column("resource_id", String(128), nullable=True),
    Column("outcome", String(16), nullable=False),
    Column("details_json", JSON_DOCUMENT, nullable=False),
    Column("trace_id", String(64), nullable=True),
    *audit_columns(),
    Index(None, "workspace_id", "occurred_at"),
)

idempotency_record = Table(
    "idempotency_record",
    metadata,
    id_column(),
    workspace_column(nullable=True, foreign_key=False),
    Column("scope", String(256), nullable=False),
    Column("key_hash", String(64), nullable=False),
    Column("request_fingerprint", String(64), nullable=False),
    Column("response_status", Integer, nullable=False),
    Column("response_body_json", JSON_DOCUMENT, nullable=True),
    Column("resource_id", String(128), nullable=True),
    Column("expires_at", UtcDateTime(), nullable=False),
    *audit_columns(),
    UniqueConstraint("scope", "key_hash"),
    Index(None, "expires_at"),
)

__all__ = ["artifact", "audit_event", "idempotency_record"]
