"""Tables: runs, run items, resend sets, run events and run commands."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from wepush.server.domain import EXTERNAL_REQUEST_ID_MAX_CHARS, PROVIDER_CODE_MAX_CHARS

from ._metadata import ID_LENGTH, audit_columns, id_column, metadata, ref_column, workspace_column
from ._tables_audience import ITEM_KEY_LENGTH
from ._types import JSON_DOCUMENT, UtcDateTime

run = Table(
    "run",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("job_id", "job.id"),
    Column("trigger", String(16), nullable=False),
    # Schedules are hard-deleted; the run keeps the id as history.
    ref_column("schedule_id", None, nullable=True),
    ref_column("source_run_id", "run.id", nullable=True),
    Column("provider_id", String(128), nullable=False),
    # Copies of ids frozen in snapshot_json, so "is this resource used by a run?" is an indexed query.
    ref_column("account_id", "account.id"),
    ref_column("message_id", "message.id"),
    Column("message_revision", Integer, nullable=False),
    ref_column("audience_snapshot_id", "audience_snapshot.id"),
    Column("state", String(16), nullable=False),
    Column("state_reason", Text, nullable=True),
    Column("reason", Text, nullable=True),
    Column("dry_run", Boolean, nullable=False),
    Column("snapshot_json", JSON_DOCUMENT, nullable=False),
    Column("recipient_count", BigInteger, nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("succeeded", BigInteger, nullable=False),
    Column("failed", BigInteger, nullable=False),
    Column("unknown", BigInteger, nullable=False),
    Column("unsent", BigInteger, nullable=False),
    Column("skipped", BigInteger, nullable=False),
    Column("retried", BigInteger, nullable=False),
    Column("current_concurrency", Integer, nullable=False),
    Column("started_at", UtcDateTime(), nullable=True),
    Column("ended_at", UtcDateTime(), nullable=True),
    Column("last_event_sequence", BigInteger, nullable=False),
    Column("idempotency_key_hash", String(64), nullable=True),
    # SHA-256 of the confirmation token that started a real send: one confirmation starts one run.
    Column("confirmation_digest", String(64), nullable=True),
    # The dispatch high-water mark: raised before each recipient batch reaches the engine, so after a crash
    # an item without a result at or below it may have been sent (UNKNOWN), one above it never was (UNSENT).
    Column("dispatched_through_sequence", BigInteger, nullable=False, server_default=text("0")),
    *audit_columns(),
    Index(None, "workspace_id", "state", "created_at"),
    Index(None, "workspace_id", "created_at"),
    Index(None, "job_id", "created_at"),
    Index(None, "state", "created_at"),
    Index(None, "account_id"),
    Index(None, "message_id"),
    Index(None, "audience_snapshot_id"),
    # NULL keys never collide, so runs without a key are unconstrained on both databases.
    UniqueConstraint("workspace_id", "idempotency_key_hash"),
    # Dry runs need no confirmation: NULL, and unconstrained likewise.
    Index("uq_run_workspace_id_confirmation_digest", "workspace_id", "confirmation_digest", unique=True),
)

run_item = Table(
    "run_item",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("run_id", "run.id"),
    Column("sequence", BigInteger, nullable=False),
    Column("item_id", String(ITEM_KEY_LENGTH), nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("error_category", String(32), nullable=True),
    Column("provider_code", String(PROVIDER_CODE_MAX_CHARS), nullable=True),
    Column("diagnostic", Text, nullable=True),
    Column("external_request_id", String(EXTERNAL_REQUEST_ID_MAX_CHARS), nullable=True),
    Column("finished_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    UniqueConstraint("run_id", "item_id"),
    Index(None, "run_id", "sequence"),
    Index(None, "run_id", "state", "sequence"),
)

run_retry_item = Table(
    "run_retry_item",
    metadata,
    Column("run_id", String(ID_LENGTH), ForeignKey("run.id"), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("source_item_id", String(ITEM_KEY_LENGTH), nullable=False),
    PrimaryKeyConstraint("run_id", "sequence"),
)

run_event = Table(
    "run_event",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("run_id", "run.id"),
    Column("sequence", BigInteger, nullable=False),
    Column("type", String(64), nullable=False),
    Column("occurred_at", UtcDateTime(), nullable=False),
    Column("data_json", JSON_DOCUMENT, nullable=False),
    *audit_columns(),
    UniqueConstraint("run_id", "sequence"),
    Index(None, "occurred_at"),
)

run_command = Table(
    "run_command",
    metadata,
    id_column(),
    workspace_column(),
    ref_column("run_id", "run.id"),
    Column("command_id", String(128), nullable=False),
    Column("type", String(32), nullable=False),
    Column("payload_json", JSON_DOCUMENT, nullable=False),
    Column("state", String(16), nullable=False),
    Column("result_message", Text, nullable=True),
    Column("agent_sequence", BigInteger, nullable=True),
    Column("acknowledged_at", UtcDateTime(), nullable=True),
    *audit_columns(),
    UniqueConstraint("command_id"),
    Index(None, "run_id", "created_at"),
)

__all__ = ["run", "run_command", "run_event", "run_item", "run_retry_item"]
