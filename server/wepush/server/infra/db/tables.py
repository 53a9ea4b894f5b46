"""The Service schema: one MetaData, every table. Alembic's ``0001_initial`` must produce exactly this."""

from __future__ import annotations

from ._metadata import NAMING_CONVENTION, metadata
from ._tables_agents import agent, agent_enrollment_token, agent_lease, agent_message_outbox
from ._tables_audience import (
    audience,
    audience_import,
    audience_import_row,
    audience_recipient,
    audience_snapshot,
)
from ._tables_core import (
    account,
    api_token,
    job,
    message,
    message_revision,
    schedule,
    secret_record,
    workspace,
    workspace_member,
)
from ._tables_records import artifact, audit_event, idempotency_record
from ._tables_runs import run, run_command, run_event, run_item, run_retry_item
from ._tables_schema import schema_compatibility
from ._types import JSON_DOCUMENT, CanonicalJSON, UtcDateTime

__all__ = [
    "JSON_DOCUMENT",
    "NAMING_CONVENTION",
    "CanonicalJSON",
    "UtcDateTime",
    "account",
    "agent",
    "agent_enrollment_token",
    "agent_lease",
    "agent_message_outbox",
    "api_token",
    "artifact",
    "audience",
    "audience_import",
    "audience_import_row",
    "audience_recipient",
    "audience_snapshot",
    "audit_event",
    "idempotency_record",
    "job",
    "message",
    "message_revision",
    "metadata",
    "run",
    "run_command",
    "run_event",
    "run_item",
    "run_retry_item",
    "schedule",
    "schema_compatibility",
    "secret_record",
    "workspace",
    "workspace_member",
]
