"""What the Run use cases return: read models the API renders (never rows, never raw snapshots)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from wepush.server.application.execution import RunSnapshot
from wepush.server.domain import (
    Agent,
    AgentLease,
    Artifact,
    ItemState,
    Job,
    Run,
    RunCommandType,
    RunItem,
    RunState,
    allowed_commands,
)


@dataclass(frozen=True, slots=True)
class RunItemView:
    """One item of a run with the recipient's own item id from the audience snapshot (``None`` once the
    snapshot is gone): the run's ``item_id`` is opaque and per run."""

    item: RunItem
    recipient_item_id: str | None


@dataclass(frozen=True, slots=True)
class ConcurrencyView:
    current: int
    target: int
    min: int
    max: int


@dataclass(frozen=True, slots=True)
class RunView:
    """A run with what its detail shows: frozen inputs, executor, artifacts, concurrency."""

    run: Run
    snapshot: RunSnapshot
    audience_revision: int
    concurrency: ConcurrencyView
    artifacts: tuple[Artifact, ...]
    lease: AgentLease | None
    agent: Agent | None
    now: datetime
    live_in_flight: int | None = None
    """Items in flight by the run's latest PROGRESS event (started, or waiting for a retry, without an
    outcome yet); ``None`` before the first one."""

    @property
    def allowed_commands(self) -> tuple[RunCommandType, ...]:
        return allowed_commands(self.run.state)

    @property
    def executing(self) -> bool:
        return self.run.state in (RunState.RUNNING, RunState.PAUSED, RunState.CANCELLING)

    @property
    def rate_limit(self) -> float | None:
        value = self.snapshot.policies.get("rateLimit", {}).get("permitsPerSecond")
        return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class RunConfirmationView:
    job: Job
    account_name: str
    snapshot: RunSnapshot
    estimated_seconds: float | None
    token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ResendConfirmationView:
    source_run_id: str
    outcomes: tuple[ItemState, ...]
    matching_items: int
    token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class RunListFilter:
    states: frozenset[RunState] | None = None
    job_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
