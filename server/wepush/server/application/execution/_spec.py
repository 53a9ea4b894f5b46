"""From a frozen snapshot to what the engine consumes: the execution spec and recipient records."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
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

__all__ = ["execution_spec", "item_id_for", "recipient_fields_record", "recipient_record"]

_ITEM_NAMESPACE = uuid.UUID("0b6c4f35-5b7e-4f4e-9a57-6d2f5e0c9a11")


_NAMESPACE_BYTES = _ITEM_NAMESPACE.bytes


def item_id_for(run_id: str, snapshot_id: str, sequence: int) -> str:
    """The stable, opaque item id of one recipient in one run (runId + audienceSnapshotId + sequence), so a
    recovery or a retried batch always names the same item.

    This is ``str(uuid.uuid5(namespace, name))`` spelled out (RFC 4122 name-based, SHA-1): it runs for
    every recipient of every run, and the ``UUID`` object in between costs more than the hash.
    """
    digest = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + f"{run_id}/{snapshot_id}/{sequence}".encode()).digest()[:16]  # noqa: S324 - RFC 4122 version 5 is defined on SHA-1
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _value(raw: Any) -> RecipientValue:
    try:
        return recipient_value(raw)
    except (TypeError, ValueError):
        # Nested or non-finite values are carried as their JSON text rather than failing the whole run.
        return TextValue(json.dumps(raw, ensure_ascii=False, sort_keys=True, default=str))


_TEXT = TextValue


def recipient_record(run_id: str, recipient: Recipient) -> RecipientRecord:
    return recipient_fields_record(run_id, recipient.snapshot_id, recipient.sequence, recipient.fields)


def recipient_fields_record(
    run_id: str, snapshot_id: str, sequence: int, fields: Mapping[str, Any]
) -> RecipientRecord:
    """The engine's record of the recipient at ``sequence`` of ``snapshot_id`` with these stored fields."""
    # Audience fields are nearly always text: wrap those directly, everything else through ``_value``.
    values = {name: _TEXT(value) if type(value) is str else _value(value) for name, value in fields.items()}
    return RecipientRecord(
        item_id_for(run_id, snapshot_id, sequence),
        sequence,
        # Already a private copy: handing it over read-only spares RecipientRecord another one.
        MappingProxyType(values),
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
