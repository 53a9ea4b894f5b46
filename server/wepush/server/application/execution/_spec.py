"""From a frozen snapshot to what the engine consumes: the execution spec and recipient records."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from wepush.agent.engine import (
    ConfigDocument,
    ProviderRef,
    RecipientRecord,
    RecipientValue,
    RunExecutionSpec,
    TextValue,
    recipient_value,
)
from wepush.server.domain import Recipient

from ._policies import policies_from_json
from ._snapshot import RunSnapshot

__all__ = ["execution_spec", "item_id_for", "recipient_record"]

_ITEM_NAMESPACE = uuid.UUID("0b6c4f35-5b7e-4f4e-9a57-6d2f5e0c9a11")


def item_id_for(run_id: str, snapshot_id: str, sequence: int) -> str:
    """The stable, opaque item id of one recipient in one run (runId + audienceSnapshotId + sequence), so a
    recovery or a retried batch always names the same item."""
    return str(uuid.uuid5(_ITEM_NAMESPACE, f"{run_id}/{snapshot_id}/{sequence}"))


def _value(raw: Any) -> RecipientValue:
    try:
        return recipient_value(raw)
    except (TypeError, ValueError):
        # Nested or non-finite values are carried as their JSON text rather than failing the whole run.
        return TextValue(json.dumps(raw, ensure_ascii=False, sort_keys=True, default=str))


def recipient_record(run_id: str, recipient: Recipient) -> RecipientRecord:
    return RecipientRecord(
        item_id_for(run_id, recipient.snapshot_id, recipient.sequence),
        recipient.sequence,
        {name: _value(value) for name, value in recipient.fields.items()},
    )


def execution_spec(snapshot: RunSnapshot, created_at: datetime | None = None) -> RunExecutionSpec:
    """The engine's spec. Raises ``InvalidPolicies`` when the frozen policies no longer validate."""
    provider = snapshot.provider.id
    attributes = {
        "workspaceId": snapshot.workspace_id,
        "jobId": snapshot.job_id,
        "trigger": snapshot.trigger.value,
    }
    if snapshot.source_run_id is not None:
        attributes["sourceRunId"] = snapshot.source_run_id
    return RunExecutionSpec(
        run_id=snapshot.run_id,
        provider=ProviderRef(provider, snapshot.provider.version),
        account_config=ConfigDocument.from_json(
            f"{provider}/account", snapshot.account.schema_version, snapshot.account.config
        ),
        message_config=ConfigDocument.from_json(
            f"{provider}/message", snapshot.message.schema_version, snapshot.message.content
        ),
        policies=policies_from_json(snapshot.policies),
        attributes=attributes,
        dry_run=snapshot.dry_run,
        created_at=created_at,
    )
