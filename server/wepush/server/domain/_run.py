"""Runs, their per-recipient items, ordered events and operator commands."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ._common import JsonObject, new_id
from ._run_state import RunCommandType, RunState


class RunTrigger(StrEnum):
    MANUAL = "MANUAL"
    SCHEDULE = "SCHEDULE"
    RESEND = "RESEND"


@dataclass(frozen=True, slots=True)
class RunCounts:
    """``total = succeeded + failed + unknown + unsent + skipped``; ``retried`` counts attempts only."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    unsent: int = 0
    skipped: int = 0
    retried: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One execution of a Job. ``snapshot`` is the frozen execution spec (provider, account, message,
    audience and policy versions); the id columns beside it exist so references can be queried."""

    workspace_id: str
    job_id: str
    trigger: RunTrigger = RunTrigger.MANUAL
    schedule_id: str | None = None
    source_run_id: str | None = None
    provider_id: str
    account_id: str
    message_id: str
    message_revision: int
    audience_snapshot_id: str
    state: RunState = RunState.PENDING
    state_reason: str | None = None
    reason: str | None = None
    dry_run: bool = False
    snapshot: JsonObject
    recipient_count: int = 0
    counts: RunCounts = RunCounts()
    current_concurrency: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    last_event_sequence: int = 0
    idempotency_key_hash: str | None = None
    #: SHA-256 (hex) of the confirmation token that started this real send, unique in the workspace.
    confirmation_digest: str | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1

    @property
    def cancelled_before_start(self) -> bool:
        """CANCELLING and never RUNNING: cancelled while PENDING, so no agent ever held it and nothing was
        sent; the Service records its recipients UNSENT and ends it CANCELLED."""
        return self.state is RunState.CANCELLING and self.started_at is None


class ItemState(StrEnum):
    PENDING = "PENDING"
    IN_FLIGHT = "IN_FLIGHT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    UNSENT = "UNSENT"
    SKIPPED = "SKIPPED"


RESENDABLE_ITEM_STATES: frozenset[ItemState] = frozenset(
    {ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT}
)


#: Longest provider code and external request id an item result keeps (the run_item columns).
PROVIDER_CODE_MAX_CHARS = 128
EXTERNAL_REQUEST_ID_MAX_CHARS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemResult:
    """An item outcome reported for one attempt. Re-reporting the same item and attempt is a no-op;
    a higher attempt replaces the stored outcome, a lower one is ignored.

    ``provider_code`` holds at most :data:`PROVIDER_CODE_MAX_CHARS` characters and
    ``external_request_id`` at most :data:`EXTERNAL_REQUEST_ID_MAX_CHARS`."""

    item_id: str
    sequence: int
    state: ItemState
    attempt: int
    error_category: str | None = None
    provider_code: str | None = None
    diagnostic: str | None = None
    external_request_id: str | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunItem:
    workspace_id: str
    run_id: str
    item_id: str
    sequence: int
    state: ItemState
    attempt: int
    error_category: str | None = None
    provider_code: str | None = None
    diagnostic: str | None = None
    external_request_id: str | None = None
    finished_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True)
class RetryItem:
    """An item a resend Run is limited to: the source item and its recipient sequence."""

    run_id: str
    sequence: int
    source_item_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEventDraft:
    """An event before it gets its per-run sequence."""

    type: str
    occurred_at: datetime
    data: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    """An event in a Run's history; ``sequence`` is contiguous per run from 1 and is the SSE id."""

    workspace_id: str
    run_id: str
    sequence: int
    type: str
    occurred_at: datetime
    data: JsonObject
    created_at: datetime
    id: str = field(default_factory=new_id)


class RunCommandState(StrEnum):
    ACCEPTED = "ACCEPTED"
    DELIVERED = "DELIVERED"
    APPLIED = "APPLIED"
    REJECTED = "REJECTED"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCommand:
    """An operator command; idempotent by ``command_id``; the agent applies it asynchronously."""

    workspace_id: str
    run_id: str
    command_id: str
    type: RunCommandType
    payload: JsonObject = field(default_factory=dict)
    state: RunCommandState = RunCommandState.ACCEPTED
    result_message: str | None = None
    agent_sequence: int | None = None
    acknowledged_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1
