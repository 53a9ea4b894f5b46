"""Tables: agents, enrollment tokens, leases and the Service→Agent outbox."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table, Text, UniqueConstraint, text

from ._metadata import audit_columns, id_column, metadata, ref_column, workspace_column
from ._types import JSON_DOCUMENT, UtcDateTime

ACTIVE_LEASE = text("state = 'ACTIVE'")

agent = Table(
    "agent",
    metadata,
    id_column(),
    workspace_column(),
    Column("display_name", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    # The agent software version; ``version`` is the optimistic lock like everywhere else.
    Column("agent_version", String(64), nullable=False),
    Column("protocol_version", String(16), nullable=True),
    Column("platform_json", JSON_DOCUMENT, nullable=False),
    Column("providers_json", JSON_DOCUMENT, nullable=False),
    Column("capacity_json", JSON_DOCUMENT, nullable=False),
    Column("credential_hash", String(64), nullable=True),
    Column("session_public_key", Text, nullable=True),
    Column("last_seen_at", UtcDateTime(), nullable=True),
    Column("disabled_at", UtcDateTime(), nullable=True),
    # Allocator of agent_message_outbox.sequence: incremented atomically, so sequences never collide.
    Column("last_outbox_sequence", BigInteger, nullable=False),
    *audit_columns(),
    UniqueConstraint("credential_hash"),
    Index(None, "status", "last_seen_at"),
    Index(None, "workspace_id", "created_at"),
)

agent_enrollment_token = Table(
    "agent_enrollment_token",
    metadata,
    id_column(),
    workspace_column(),
    Column("token_hash", String(64), nullable=False),
    Column("expires_at", UtcDateTime(), nullable=False),
    Column("used_at", UtcDateTime(), nullable=True),
    Column("created_by", String(128), nullable=False),
    *audit_columns(),
    UniqueConstraint("token_hash"),
)

agent_lease = Table(
    "agent_lease",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("run_id", "run.id"),
    ref_column("agent_id", "agent.id"),
    Column("state", String(16), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("fencing_token_hash", String(64), nullable=False),
    Column("expires_at", UtcDateTime(), nullable=False),
    Column("ack_deadline", UtcDateTime(), nullable=False),
    Column("acked_at", UtcDateTime(), nullable=True),
    Column("last_event_sequence", BigInteger, nullable=False),
    *audit_columns(),
    # The database, not the application, guarantees at most one ACTIVE lease per run.
    Index(
        "uq_agent_lease_run_id_active",
        "run_id",
        unique=True,
        sqlite_where=ACTIVE_LEASE,
        postgresql_where=ACTIVE_LEASE,
    ),
    UniqueConstraint("run_id", "epoch"),
    Index(None, "agent_id", "expires_at"),
    Index(None, "state", "expires_at"),
)

agent_message_outbox = Table(
    "agent_message_outbox",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("agent_id", "agent.id"),
    Column("sequence", BigInteger, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("payload_json", JSON_DOCUMENT, nullable=False),
    Column("state", String(16), nullable=False),
    Column("sent_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    UniqueConstraint("agent_id", "sequence"),
    Index(None, "state", "updated_at"),
)

__all__ = ["agent", "agent_enrollment_token", "agent_lease", "agent_message_outbox"]
