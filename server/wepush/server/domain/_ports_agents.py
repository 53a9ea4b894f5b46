"""Ports for agents, enrollment tokens, leases (claim and fenced writes) and the agent outbox."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from ._agent import (
    Agent,
    AgentLease,
    AgentStatus,
    ClaimedLease,
    EnrollmentToken,
    EventBatchAck,
    LeaseFence,
    OutboxMessage,
)
from ._common import JsonObject
from ._paging import Keyset, Page, PageRequest
from ._run import RunEventDraft


class AgentRepository(Protocol):
    async def add(self, agent: Agent) -> Agent: ...

    async def get(self, workspace_id: str, agent_id: str) -> Agent: ...

    async def find_by_credential_hash(self, credential_hash: str) -> Agent | None: ...

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        statuses: Collection[AgentStatus] | None = None,
    ) -> Page[Agent, Keyset]: ...

    async def update(self, agent: Agent) -> Agent: ...

    async def record_heartbeat(
        self, agent_id: str, *, status: AgentStatus, seen_at: datetime, capacity: JsonObject | None = None
    ) -> None:
        """Liveness without a version bump, so heartbeats never conflict with administrative edits.
        A disabled agent keeps status DISABLED."""
        ...

    async def add_enrollment_token(self, token: EnrollmentToken) -> EnrollmentToken: ...

    async def consume_enrollment_token(self, token_hash: str, now: datetime) -> EnrollmentToken | None:
        """Mark an unused, unexpired token used, in one conditional update; ``None`` if that failed.
        Two concurrent enrollments with one token: exactly one succeeds."""
        ...


class LeaseRepository(Protocol):
    """Lease claim and every fenced write.

    A fenced write names lease id, epoch and fencing token; it succeeds only while that lease is
    ACTIVE, unexpired and carries the same epoch and token hash, otherwise :class:`LeaseExpired`.
    The check and the write are one statement (or run under a row lock), never read-then-write.
    """

    async def claim(
        self,
        workspace_id: str,
        run_id: str,
        agent_id: str,
        *,
        expires_at: datetime,
        ack_deadline: datetime,
    ) -> ClaimedLease | None:
        """PENDING → LEASED and a new ACTIVE lease with the next epoch and a fresh random token, in
        one savepoint. ``None`` when the run is not PENDING any more (another claim won). The partial
        unique index on ACTIVE leases makes a second ACTIVE lease impossible."""
        ...

    async def claim_next(
        self,
        workspace_id: str,
        agent_id: str,
        *,
        expires_at: datetime,
        ack_deadline: datetime,
        provider_ids: Collection[str] | None = None,
    ) -> ClaimedLease | None:
        """Claim the oldest PENDING run of the workspace (optionally only for ``provider_ids``).
        PostgreSQL picks candidates with ``FOR UPDATE SKIP LOCKED``; SQLite has a single writer."""
        ...

    async def get(self, lease_id: str) -> AgentLease: ...

    async def find_active(self, run_id: str) -> AgentLease | None: ...

    async def list_for_agent(self, agent_id: str, *, active_only: bool = True) -> list[AgentLease]: ...

    async def check(self, fence: LeaseFence, now: datetime) -> AgentLease:
        """Validate the fence and hold the lease row (shared lock on PostgreSQL) for the rest of the
        unit of work, so fenced writes to other tables cannot race a revocation."""
        ...

    async def acknowledge(self, fence: LeaseFence, now: datetime) -> AgentLease:
        """Record the LeaseAck before ``ack_deadline``; repeating it is a no-op."""
        ...

    async def renew(self, fence: LeaseFence, now: datetime, *, expires_at: datetime) -> AgentLease: ...

    async def accept_event_batch(
        self, fence: LeaseFence, now: datetime, *, first_sequence: int, events: Sequence[RunEventDraft]
    ) -> EventBatchAck:
        """Append an agent EventBatch whose agent-side sequences are ``first_sequence …``.

        Events at or below the lease's acknowledged sequence are skipped (safe re-delivery); a batch
        starting beyond ``acked + 1`` appends nothing and reports ``gap``. New events receive run
        sequences like :meth:`RunEventRepository.append`.
        """
        ...

    async def release(self, fence: LeaseFence, now: datetime) -> AgentLease:
        """ACTIVE → RELEASED when the agent completes the run."""
        ...

    async def revoke(self, lease_id: str) -> AgentLease | None:
        """ACTIVE → REVOKED (service decision); ``None`` when the lease was not active."""
        ...

    async def expire_overdue(self, now: datetime, limit: int) -> list[AgentLease]:
        """ACTIVE leases past ``expires_at``, or unacknowledged past ``ack_deadline``, become EXPIRED;
        returns them so the caller can move their runs to LOST."""
        ...


class AgentOutboxRepository(Protocol):
    async def enqueue(
        self, workspace_id: str, agent_id: str, kind: str, payload: JsonObject
    ) -> OutboxMessage:
        """Append with the agent's next sequence (allocated atomically on the agent row)."""
        ...

    async def unacknowledged(
        self, agent_id: str, *, after_sequence: int = 0, limit: int = 100
    ) -> list[OutboxMessage]:
        """PENDING and SENT messages in sequence order: what a (re)connected stream must deliver."""
        ...

    async def mark_sent(self, agent_id: str, sequences: Sequence[int], sent_at: datetime) -> int: ...

    async def acknowledge_through(self, agent_id: str, sequence: int) -> int:
        """Mark every message up to ``sequence`` ACKED; returns how many changed."""
        ...

    async def purge_acknowledged(self, before: datetime, limit: int) -> int: ...
