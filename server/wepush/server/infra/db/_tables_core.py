"""Tables: workspaces, members, API tokens, secret records, accounts, messages, jobs, schedules."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from ._metadata import audit_columns, id_column, metadata, ref_column, workspace_column
from ._types import JSON_DOCUMENT, UtcDateTime

LIVE = text("deleted_at IS NULL")
"""Predicate of the partial indexes that apply to rows that are not soft-deleted."""

workspace = Table(
    "workspace",
    metadata,
    id_column(),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    *audit_columns(),
    UniqueConstraint("name"),
)

workspace_member = Table(
    "workspace_member",
    metadata,
    id_column(),
    workspace_column(),
    Column("principal_id", String(128), nullable=False),
    Column("role", String(16), nullable=False),
    *audit_columns(),
    UniqueConstraint("workspace_id", "principal_id"),
)

api_token = Table(
    "api_token",
    metadata,
    id_column(),
    workspace_column(nullable=True),
    Column("name", String(200), nullable=False),
    Column("token_hash", String(64), nullable=False),
    Column("token_prefix", String(16), nullable=False),
    Column("role", String(16), nullable=False),
    Column("principal_id", String(128), nullable=False),
    Column("system_admin", Boolean, nullable=False),
    Column("expires_at", UtcDateTime(), nullable=True),
    Column("revoked_at", UtcDateTime(), nullable=True),
    Column("last_used_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    UniqueConstraint("token_hash"),
    Index(None, "workspace_id", "created_at"),
)

secret_record = Table(
    "secret_record",
    metadata,
    id_column(),
    workspace_column(),
    Column("owner_type", String(32), nullable=False),
    Column("owner_id", String(128), nullable=False),
    Column("name", String(200), nullable=False),
    Column("ciphertext", LargeBinary, nullable=False),
    Column("nonce", LargeBinary, nullable=False),
    Column("encrypted_dek", LargeBinary, nullable=False),
    Column("dek_nonce", LargeBinary, nullable=False),
    Column("algorithm", String(32), nullable=False),
    Column("key_version", Integer, nullable=False),
    Column("record_version", Integer, nullable=False),
    *audit_columns(),
    UniqueConstraint("owner_type", "owner_id", "name"),
)

account = Table(
    "account",
    metadata,
    id_column(),
    workspace_column(),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("provider_id", String(128), nullable=False),
    Column("provider_version", String(64), nullable=False),
    Column("config_json", JSON_DOCUMENT, nullable=False),
    Column("schema_version", String(64), nullable=False),
    Column("deleted_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(
        "uq_account_workspace_id_name_live",
        "workspace_id",
        "name",
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    ),
    Index(None, "workspace_id", "created_at"),
)

message = Table(
    "message",
    metadata,
    id_column(),
    workspace_column(),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("provider_id", String(128), nullable=False),
    Column("latest_revision", Integer, nullable=False),
    Column("deleted_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(
        "uq_message_workspace_id_name_live",
        "workspace_id",
        "name",
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    ),
    Index(None, "workspace_id", "created_at"),
)

message_revision = Table(
    "message_revision",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("message_id", "message.id"),
    Column("revision", Integer, nullable=False),
    Column("content_json", JSON_DOCUMENT, nullable=False),
    Column("content_hash", String(64), nullable=False),
    *audit_columns(),
    UniqueConstraint("message_id", "revision"),
)

job = Table(
    "job",
    metadata,
    id_column(),
    workspace_column(),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    ref_column("account_id", "account.id"),
    ref_column("message_id", "message.id"),
    Column("message_revision", Integer, nullable=False),
    ref_column("audience_snapshot_id", "audience_snapshot.id"),
    Column("policies_json", JSON_DOCUMENT, nullable=False),
    Column("deleted_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(
        "uq_job_workspace_id_name_live",
        "workspace_id",
        "name",
        unique=True,
        sqlite_where=LIVE,
        postgresql_where=LIVE,
    ),
    Index(None, "workspace_id", "created_at"),
    Index(None, "account_id"),
    Index(None, "message_id"),
    Index(None, "audience_snapshot_id"),
)

schedule = Table(
    "schedule",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("job_id", "job.id"),
    Column("name", String(200), nullable=False),
    Column("cron", String(128), nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("misfire_policy", String(32), nullable=False),
    Column("catch_up_limit", Integer, nullable=True),
    Column("start_at", UtcDateTime(), nullable=True),
    Column("end_at", UtcDateTime(), nullable=True),
    Column("last_fire_at", UtcDateTime(), nullable=True),
    Column("next_fire_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    Index(None, "enabled", "next_fire_at"),
    Index(None, "job_id"),
    Index(None, "workspace_id", "created_at"),
)

__all__ = [
    "account",
    "api_token",
    "job",
    "message",
    "message_revision",
    "schedule",
    "secret_record",
    "workspace",
    "workspace_member",
]
