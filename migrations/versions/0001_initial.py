"""Initial Service schema.

Every business table has ``id`` (UUIDv7 text), ``workspace_id``, ``created_at``/``updated_at`` (UTC) and the
optimistic-lock ``version``. Enumerations are readable VARCHARs. JSON is JSONB on PostgreSQL and canonical
JSON TEXT on SQLite. Partial unique indexes (one ACTIVE lease per run, live account names) exist on both.
Bulk child rows (staging rows, recipients, resend items) are keyed by parent and position.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.Text().with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
ID = sa.String(36)


def _id() -> sa.Column[str]:
    return sa.Column("id", ID, nullable=False)


def _ref(name: str, *, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, ID, nullable=nullable)


def _stamps() -> list[sa.Column[object]]:
    return [
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    ]


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=f"pk_{table}")


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [f"{target}.id"], name=f"fk_{table}_{column}_{target}")


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=f"uq_{table}_{'_'.join(columns)}")


def _ix(table: str, *columns: str) -> None:
    op.create_index(f"ix_{table}_{'_'.join(columns)}", table, list(columns))


def _partial_unique(name: str, table: str, columns: list[str], where: str) -> None:
    op.create_index(
        name, table, columns, unique=True, sqlite_where=sa.text(where), postgresql_where=sa.text(where)
    )


def upgrade() -> None:
    op.create_table(
        "workspace",
        _id(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        *_stamps(),
        _pk("workspace"),
        _uq("workspace", "name"),
    )
    op.create_table(
        "workspace_member",
        _id(),
        _ref("workspace_id"),
        sa.Column("principal_id", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        *_stamps(),
        _pk("workspace_member"),
        _fk("workspace_member", "workspace_id", "workspace"),
        _uq("workspace_member", "workspace_id", "principal_id"),
    )
    op.create_table(
        "api_token",
        _id(),
        _ref("workspace_id", nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("token_prefix", sa.String(16), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("principal_id", sa.String(128), nullable=False),
        sa.Column("system_admin", sa.Boolean(), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.Column("last_used_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("api_token"),
        _fk("api_token", "workspace_id", "workspace"),
        _uq("api_token", "token_hash"),
    )
    _ix("api_token", "workspace_id", "created_at")
    op.create_table(
        "secret_record",
        _id(),
        _ref("workspace_id"),
        sa.Column("owner_type", sa.String(32), nullable=False),
        sa.Column("owner_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("encrypted_dek", sa.LargeBinary(), nullable=False),
        sa.Column("dek_nonce", sa.LargeBinary(), nullable=False),
        sa.Column("algorithm", sa.String(32), nullable=False),
        sa.Column("key_version", sa.Integer(), nullable=False),
        sa.Column("record_version", sa.Integer(), nullable=False),
        *_stamps(),
        _pk("secret_record"),
        _fk("secret_record", "workspace_id", "workspace"),
        _uq("secret_record", "owner_type", "owner_id", "name"),
    )

    op.create_table(
        "account",
        _id(),
        _ref("workspace_id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("provider_id", sa.String(128), nullable=False),
        sa.Column("provider_version", sa.String(64), nullable=False),
        sa.Column("config_json", JSON, nullable=False),
        sa.Column("schema_version", sa.String(64), nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("account"),
        _fk("account", "workspace_id", "workspace"),
    )
    _partial_unique(
        "uq_account_workspace_id_name_live", "account", ["workspace_id", "name"], "deleted_at IS NULL"
    )
    _ix("account", "workspace_id", "created_at")

    op.create_table(
        "message",
        _id(),
        _ref("workspace_id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("provider_id", sa.String(128), nullable=False),
        sa.Column("latest_revision", sa.Integer(), nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("message"),
        _fk("message", "workspace_id", "workspace"),
    )
    _ix("message", "workspace_id", "created_at")
    op.create_table(
        "message_revision",
        _id(),
        _ref("workspace_id"),
        _ref("message_id"),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("content_json", JSON, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        *_stamps(),
        _pk("message_revision"),
        _fk("message_revision", "workspace_id", "workspace"),
        _fk("message_revision", "message_id", "message"),
        _uq("message_revision", "message_id", "revision"),
    )

    op.create_table(
        "audience",
        _id(),
        _ref("workspace_id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        _ref("latest_snapshot_id", nullable=True),
        sa.Column("latest_revision", sa.Integer(), nullable=False),
        sa.Column("recipient_count", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("audience"),
        _fk("audience", "workspace_id", "workspace"),
    )
    _ix("audience", "workspace_id", "created_at")
    op.create_table(
        "audience_import",
        _id(),
        _ref("workspace_id"),
        _ref("audience_id"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("options_json", JSON, nullable=False),
        sa.Column("total_rows", sa.BigInteger(), nullable=False),
        sa.Column("accepted_rows", sa.BigInteger(), nullable=False),
        sa.Column("rejected_rows", sa.BigInteger(), nullable=False),
        sa.Column("duplicate_rows", sa.BigInteger(), nullable=False),
        sa.Column("columns_json", JSON, nullable=False),
        sa.Column("original_filename", sa.String(255), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        _ref("snapshot_id", nullable=True),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        *_stamps(),
        _pk("audience_import"),
        _fk("audience_import", "workspace_id", "workspace"),
        _fk("audience_import", "audience_id", "audience"),
    )
    _ix("audience_import", "audience_id", "created_at")
    _ix("audience_import", "state", "expires_at")
    op.create_table(
        "audience_import_row",
        _ref("import_id"),
        sa.Column("line_number", sa.BigInteger(), nullable=False),
        sa.Column("item_key", sa.String(256), nullable=True),
        sa.Column("fields_json", JSON, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason_code", sa.String(64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("raw", sa.Text(), nullable=True),
        _pk("audience_import_row", "import_id", "line_number"),
        _fk("audience_import_row", "import_id", "audience_import"),
    )
    _ix("audience_import_row", "import_id", "status", "line_number")
    _ix("audience_import_row", "import_id", "item_key")
    op.create_table(
        "audience_snapshot",
        _id(),
        _ref("workspace_id"),
        _ref("audience_id"),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("recipient_count", sa.BigInteger(), nullable=False),
        sa.Column("fields_json", JSON, nullable=False),
        sa.Column("checksum", sa.String(64), nullable=False),
        _ref("source_import_id", nullable=True),
        *_stamps(),
        _pk("audience_snapshot"),
        _fk("audience_snapshot", "workspace_id", "workspace"),
        _fk("audience_snapshot", "audience_id", "audience"),
        _fk("audience_snapshot", "source_import_id", "audience_import"),
        _uq("audience_snapshot", "audience_id", "revision"),
    )
    op.create_table(
        "audience_recipient",
        _ref("snapshot_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("item_key", sa.String(256), nullable=False),
        sa.Column("fields_json", JSON, nullable=False),
        _pk("audience_recipient", "snapshot_id", "sequence"),
        _fk("audience_recipient", "snapshot_id", "audience_snapshot"),
        _uq("audience_recipient", "snapshot_id", "item_key"),
    )

    op.create_table(
        "job",
        _id(),
        _ref("workspace_id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        _ref("account_id"),
        _ref("message_id"),
        sa.Column("message_revision", sa.Integer(), nullable=False),
        _ref("audience_snapshot_id"),
        sa.Column("policies_json", JSON, nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("job"),
        _fk("job", "workspace_id", "workspace"),
        _fk("job", "account_id", "account"),
        _fk("job", "message_id", "message"),
        _fk("job", "audience_snapshot_id", "audience_snapshot"),
    )
    _ix("job", "workspace_id", "created_at")
    _ix("job", "account_id")
    _ix("job", "message_id")
    _ix("job", "audience_snapshot_id")
    op.create_table(
        "schedule",
        _id(),
        _ref("workspace_id"),
        _ref("job_id"),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("cron", sa.String(128), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("misfire_policy", sa.String(32), nullable=False),
        sa.Column("catch_up_limit", sa.Integer(), nullable=True),
        sa.Column("start_at", TIMESTAMP, nullable=True),
        sa.Column("end_at", TIMESTAMP, nullable=True),
        sa.Column("last_fire_at", TIMESTAMP, nullable=True),
        sa.Column("next_fire_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("schedule"),
        _fk("schedule", "workspace_id", "workspace"),
        _fk("schedule", "job_id", "job"),
    )
    _ix("schedule", "enabled", "next_fire_at")
    _ix("schedule", "job_id")
    _ix("schedule", "workspace_id", "created_at")

    op.create_table(
        "run",
        _id(),
        _ref("workspace_id"),
        _ref("job_id"),
        sa.Column("trigger", sa.String(16), nullable=False),
        _ref("schedule_id", nullable=True),
        _ref("source_run_id", nullable=True),
        sa.Column("provider_id", sa.String(128), nullable=False),
        _ref("account_id"),
        _ref("message_id"),
        sa.Column("message_revision", sa.Integer(), nullable=False),
        _ref("audience_snapshot_id"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("state_reason", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("snapshot_json", JSON, nullable=False),
        sa.Column("recipient_count", sa.BigInteger(), nullable=False),
        *(
            sa.Column(name, sa.BigInteger(), nullable=False)
            for name in ("total", "succeeded", "failed", "unknown", "unsent", "skipped", "retried")
        ),
        sa.Column("current_concurrency", sa.Integer(), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("ended_at", TIMESTAMP, nullable=True),
        sa.Column("last_event_sequence", sa.BigInteger(), nullable=False),
        sa.Column("idempotency_key_hash", sa.String(64), nullable=True),
        *_stamps(),
        _pk("run"),
        _fk("run", "workspace_id", "workspace"),
        _fk("run", "job_id", "job"),
        _fk("run", "source_run_id", "run"),
        _fk("run", "account_id", "account"),
        _fk("run", "message_id", "message"),
        _fk("run", "audience_snapshot_id", "audience_snapshot"),
        _uq("run", "workspace_id", "idempotency_key_hash"),
    )
    _ix("run", "workspace_id", "state", "created_at")
    _ix("run", "workspace_id", "created_at")
    _ix("run", "job_id", "created_at")
    _ix("run", "state", "created_at")
    _ix("run", "account_id")
    _ix("run", "message_id")
    _ix("run", "audience_snapshot_id")
    op.create_table(
        "run_item",
        _id(),
        _ref("workspace_id"),
        _ref("run_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("item_id", sa.String(256), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error_category", sa.String(32), nullable=True),
        sa.Column("provider_code", sa.String(128), nullable=True),
        sa.Column("diagnostic", sa.Text(), nullable=True),
        sa.Column("external_request_id", sa.String(256), nullable=True),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("run_item"),
        _fk("run_item", "workspace_id", "workspace"),
        _fk("run_item", "run_id", "run"),
        _uq("run_item", "run_id", "item_id"),
    )
    _ix("run_item", "run_id", "sequence")
    _ix("run_item", "run_id", "state", "sequence")
    op.create_table(
        "run_retry_item",
        _ref("run_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("source_item_id", sa.String(256), nullable=False),
        _pk("run_retry_item", "run_id", "sequence"),
        _fk("run_retry_item", "run_id", "run"),
    )
    op.create_table(
        "run_event",
        _id(),
        _ref("workspace_id"),
        _ref("run_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("occurred_at", TIMESTAMP, nullable=False),
        sa.Column("data_json", JSON, nullable=False),
        *_stamps(),
        _pk("run_event"),
        _fk("run_event", "workspace_id", "workspace"),
        _fk("run_event", "run_id", "run"),
        _uq("run_event", "run_id", "sequence"),
    )
    _ix("run_event", "occurred_at")
    op.create_table(
        "run_command",
        _id(),
        _ref("workspace_id"),
        _ref("run_id"),
        sa.Column("command_id", sa.String(128), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("payload_json", JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("result_message", sa.Text(), nullable=True),
        sa.Column("agent_sequence", sa.BigInteger(), nullable=True),
        sa.Column("acknowledged_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("run_command"),
        _fk("run_command", "workspace_id", "workspace"),
        _fk("run_command", "run_id", "run"),
        _uq("run_command", "command_id"),
    )
    _ix("run_command", "run_id", "created_at")

    op.create_table(
        "agent",
        _id(),
        _ref("workspace_id"),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("agent_version", sa.String(64), nullable=False),
        sa.Column("protocol_version", sa.String(16), nullable=True),
        sa.Column("platform_json", JSON, nullable=False),
        sa.Column("providers_json", JSON, nullable=False),
        sa.Column("capacity_json", JSON, nullable=False),
        sa.Column("credential_hash", sa.String(64), nullable=True),
        sa.Column("session_public_key", sa.Text(), nullable=True),
        sa.Column("last_seen_at", TIMESTAMP, nullable=True),
        sa.Column("disabled_at", TIMESTAMP, nullable=True),
        sa.Column("last_outbox_sequence", sa.BigInteger(), nullable=False),
        *_stamps(),
        _pk("agent"),
        _fk("agent", "workspace_id", "workspace"),
        _uq("agent", "credential_hash"),
    )
    _ix("agent", "status", "last_seen_at")
    _ix("agent", "workspace_id", "created_at")
    op.create_table(
        "agent_enrollment_token",
        _id(),
        _ref("workspace_id"),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.Column("used_at", TIMESTAMP, nullable=True),
        sa.Column("created_by", sa.String(128), nullable=False),
        *_stamps(),
        _pk("agent_enrollment_token"),
        _fk("agent_enrollment_token", "workspace_id", "workspace"),
        _uq("agent_enrollment_token", "token_hash"),
    )
    op.create_table(
        "agent_lease",
        _id(),
        _ref("workspace_id"),
        _ref("run_id"),
        _ref("agent_id"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("fencing_token_hash", sa.String(64), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.Column("ack_deadline", TIMESTAMP, nullable=False),
        sa.Column("acked_at", TIMESTAMP, nullable=True),
        sa.Column("last_event_sequence", sa.BigInteger(), nullable=False),
        *_stamps(),
        _pk("agent_lease"),
        _fk("agent_lease", "workspace_id", "workspace"),
        _fk("agent_lease", "run_id", "run"),
        _fk("agent_lease", "agent_id", "agent"),
        _uq("agent_lease", "run_id", "epoch"),
    )
    _partial_unique("uq_agent_lease_run_id_active", "agent_lease", ["run_id"], "state = 'ACTIVE'")
    _ix("agent_lease", "agent_id", "expires_at")
    _ix("agent_lease", "state", "expires_at")
    op.create_table(
        "agent_message_outbox",
        _id(),
        _ref("workspace_id"),
        _ref("agent_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload_json", JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("sent_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("agent_message_outbox"),
        _fk("agent_message_outbox", "workspace_id", "workspace"),
        _fk("agent_message_outbox", "agent_id", "agent"),
        _uq("agent_message_outbox", "agent_id", "sequence"),
    )
    _ix("agent_message_outbox", "state", "updated_at")

    op.create_table(
        "artifact",
        _id(),
        _ref("workspace_id"),
        sa.Column("owner_type", sa.String(32), nullable=False),
        _ref("owner_id"),
        sa.Column("artifact_type", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("storage_key", sa.String(1024), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("content_type", sa.String(128), nullable=False),
        sa.Column("file_name", sa.String(255), nullable=False),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("legal_hold", sa.Boolean(), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        *_stamps(),
        _pk("artifact"),
        _fk("artifact", "workspace_id", "workspace"),
    )
    _ix("artifact", "owner_type", "owner_id")
    _ix("artifact", "state", "expires_at")
    op.create_table(
        "audit_event",
        _id(),
        _ref("workspace_id", nullable=True),
        sa.Column("occurred_at", TIMESTAMP, nullable=False),
        sa.Column("actor_type", sa.String(32), nullable=False),
        sa.Column("actor_id", sa.String(128), nullable=False),
        sa.Column("action", sa.String(128), nullable=False),
        sa.Column("resource_type", sa.String(64), nullable=False),
        sa.Column("resource_id", sa.String(128), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("details_json", JSON, nullable=False),
        sa.Column("trace_id", sa.String(64), nullable=True),
        *_stamps(),
        _pk("audit_event"),
    )
    _ix("audit_event", "workspace_id", "occurred_at")
    op.create_table(
        "idempotency_record",
        _id(),
        _ref("workspace_id", nullable=True),
        sa.Column("scope", sa.String(256), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("request_fingerprint", sa.String(64), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=False),
        sa.Column("response_body_json", JSON, nullable=True),
        sa.Column("resource_id", sa.String(128), nullable=True),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        *_stamps(),
        _pk("idempotency_record"),
        _uq("idempotency_record", "scope", "key_hash"),
    )
    _ix("idempotency_record", "expires_at")


_TABLES_IN_CREATION_ORDER = (
    "workspace",
    "workspace_member",
    "api_token",
    "secret_record",
    "account",
    "message",
    "message_revision",
    "audience",
    "audience_import",
    "audience_import_row",
    "audience_snapshot",
    "audience_recipient",
    "job",
    "schedule",
    "run",
    "run_item",
    "run_retry_item",
    "run_event",
    "run_command",
    "agent",
    "agent_enrollment_token",
    "agent_lease",
    "agent_message_outbox",
    "artifact",
    "audit_event",
    "idempotency_record",
)


def downgrade() -> None:
    # Dropping a table drops its indexes and constraints too.
    for table in reversed(_TABLES_IN_CREATION_ORDER):
        op.drop_table(table)
