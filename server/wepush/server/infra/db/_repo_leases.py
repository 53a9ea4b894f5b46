"""Lease claim and fenced writes, kept together: this module is where "one ACTIVE lease per run" and
"old epochs are rejected" are enforced.

Claim: in one savepoint, move the run PENDING → LEASED with a conditional update, then insert an ACTIVE
lease with the next epoch and the hash of a fresh random fencing token. A concurrent claimer either waits
on the run row (PostgreSQL row lock, SQLite write lock) and then finds the run no longer PENDING, or hits
the partial unique index on ACTIVE leases; both end as ``None``, never as a second lease.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError

from wepush.server.domain import (
    AgentLease,
    ClaimedLease,
    EventBatchAck,
    FencingToken,
    LeaseExpired,
    LeaseFence,
    LeaseState,
    NotFound,
    RunEventDraft,
    RunState,
)

from ._base import SqlRepository, is_unique_violation
from ._mapping import RowMapper
from ._repo_events import append_run_events
from ._tables_agents import agent_lease
from ._tables_runs import run
from ._types import UtcDateTime

_LEASE = RowMapper(AgentLease, agent_lease)
_CLAIM_ATTEMPTS = 5

lease = agent_lease


def _fenced(fence: LeaseFence, now: datetime) -> list[ColumnElement[bool]]:
    return [
        lease.c.id == fence.lease_id,
        lease.c.epoch == fence.epoch,
        lease.c.fencing_token_hash == fence.token.hash,
        lease.c.state == LeaseState.ACTIVE.value,
        lease.c.expires_at > now,
    ]


class SqlLeaseRepository(SqlRepository):
    async def claim(
        self,
        workspace_id: str,
        run_id: str,
        agent_id: str,
        *,
        expires_at: datetime,
        ack_deadline: datetime,
    ) -> ClaimedLease | None:
        try:
            async with self._conn.begin_nested():
                return await self._claim(workspace_id, run_id, agent_id, expires_at, ack_deadline)
        except IntegrityError as error:
            # The savepoint is rolled back; the caller's transaction stays usable.
            if is_unique_violation(error):
                return None
            raise

    async def _claim(
        self, workspace_id: str, run_id: str, agent_id: str, expires_at: datetime, ack_deadline: datetime
    ) -> ClaimedLease | None:
        now = self._clock()
        moved = await self._conn.scalar(
            update(run)
            .where(
                run.c.id == run_id, run.c.workspace_id == workspace_id, run.c.state == RunState.PENDING.value
            )
            .values(state=RunState.LEASED.value, state_reason=None, updated_at=now, version=run.c.version + 1)
            .returning(run.c.id)
        )
        if moved is None:
            return None
        previous = await self._conn.scalar(select(func.max(lease.c.epoch)).where(lease.c.run_id == run_id))
        token = FencingToken.generate()
        new_lease = AgentLease(
            workspace_id=workspace_id,
            run_id=run_id,
            agent_id=agent_id,
            epoch=int(previous or 0) + 1,
            fencing_token_hash=token.hash,
            expires_at=expires_at,
            ack_deadline=ack_deadline,
            created_at=now,
            updated_at=now,
        )
        await self._conn.execute(lease.insert().values(**_LEASE.to_values(new_lease)))
        return ClaimedLease(new_lease, token)

    async def claim_next(
        self,
        workspace_id: str,
        agent_id: str,
        *,
        expires_at: datetime,
        ack_deadline: datetime,
        provider_ids: Collection[str] | None = None,
    ) -> ClaimedLease | None:
        tried: list[str] = []
        for _ in range(_CLAIM_ATTEMPTS):
            stmt = (
                select(run.c.id)
                .where(run.c.workspace_id == workspace_id, run.c.state == RunState.PENDING.value)
                .order_by(run.c.created_at, run.c.id)
                .limit(1)
            )
            if provider_ids is not None:
                stmt = stmt.where(run.c.provider_id.in_(list(provider_ids)))
            if tried:
                stmt = stmt.where(run.c.id.not_in(tried))
            if self._is_postgresql:
                # Lock exactly one candidate and skip runs other instances are claiming right now,
                # instead of queueing behind them (or hiding several candidates from them).
                stmt = stmt.with_for_update(skip_locked=True)
            run_id = await self._conn.scalar(stmt)
            if run_id is None:
                return None
            claimed = await self.claim(
                workspace_id, run_id, agent_id, expires_at=expires_at, ack_deadline=ack_deadline
            )
            if claimed is not None:
                return claimed
            tried.append(run_id)
        return None

    async def get(self, lease_id: str) -> AgentLease:
        return _LEASE.from_row(await self._get_row(lease, "agent_lease", lease_id))

    async def find_active(self, run_id: str) -> AgentLease | None:
        row = await self._one(
            select(lease).where(lease.c.run_id == run_id, lease.c.state == LeaseState.ACTIVE.value)
        )
        return None if row is None else _LEASE.from_row(row)

    async def list_for_agent(self, agent_id: str, *, active_only: bool = True) -> list[AgentLease]:
        stmt = select(lease).where(lease.c.agent_id == agent_id)
        if active_only:
            stmt = stmt.where(lease.c.state == LeaseState.ACTIVE.value)
        rows = await self._all(stmt.order_by(lease.c.created_at, lease.c.id))
        return [_LEASE.from_row(row) for row in rows]

    async def check(self, fence: LeaseFence, now: datetime) -> AgentLease:
        stmt = select(lease).where(*_fenced(fence, now))
        if self._is_postgresql:
            # A shared row lock: a concurrent revoke/expire waits until this unit of work ends.
            stmt = stmt.with_for_update(read=True)
        row = await self._one(stmt)
        if row is None:
            raise LeaseExpired(fence.lease_id)
        return _LEASE.from_row(row)

    async def acknowledge(self, fence: LeaseFence, now: datetime) -> AgentLease:
        return await self._fenced_update(
            fence,
            now,
            [or_(lease.c.acked_at.is_not(None), lease.c.ack_deadline >= now)],
            acked_at=func.coalesce(lease.c.acked_at, literal(now, UtcDateTime())),
        )

    async def renew(self, fence: LeaseFence, now: datetime, *, expires_at: datetime) -> AgentLease:
        return await self._fenced_update(fence, now, [], expires_at=expires_at)

    async def accept_event_batch(
        self, fence: LeaseFence, now: datetime, *, first_sequence: int, events: Sequence[RunEventDraft]
    ) -> EventBatchAck:
        if first_sequence < 1:
            raise ValueError("agent event sequences start at 1")
        stmt = select(lease).where(*_fenced(fence, now))
        if self._is_postgresql:
            stmt = stmt.with_for_update()
        row = await self._one(stmt)
        if row is None:
            raise LeaseExpired(fence.lease_id)
        current = _LEASE.from_row(row)
        acked = current.last_event_sequence
        if first_sequence > acked + 1:
            return EventBatchAck(acked, [], gap=True)
        fresh = list(events[acked + 1 - first_sequence :])
        if not fresh:
            return EventBatchAck(acked, [])
        appended = await append_run_events(
            self._conn, self._clock, current.workspace_id, current.run_id, fresh
        )
        last = first_sequence + len(events) - 1
        await self._conn.execute(
            update(lease)
            .where(lease.c.id == current.id, lease.c.last_event_sequence == acked)
            .values(last_event_sequence=last, updated_at=self._clock())
        )
        return EventBatchAck(last, appended)

    async def release(self, fence: LeaseFence, now: datetime) -> AgentLease:
        try:
            return await self._fenced_update(fence, now, [], state=LeaseState.RELEASED.value)
        except LeaseExpired:
            # A re-delivered RunCompleted finds its own lease already released: same answer again.
            row = await self._one(
                select(lease).where(
                    lease.c.id == fence.lease_id,
                    lease.c.epoch == fence.epoch,
                    lease.c.fencing_token_hash == fence.token.hash,
                    lease.c.state == LeaseState.RELEASED.value,
                )
            )
            if row is None:
                raise
            return _LEASE.from_row(row)

    async def revoke(self, lease_id: str) -> AgentLease | None:
        row = await self._one(
            update(lease)
            .where(lease.c.id == lease_id, lease.c.state == LeaseState.ACTIVE.value)
            .values(state=LeaseState.REVOKED.value, updated_at=self._clock(), version=lease.c.version + 1)
            .returning(*lease.c)
        )
        if row is None:
            if not await self._exists(lease.c.id == lease_id):
                raise NotFound("agent_lease", lease_id)
            return None
        return _LEASE.from_row(row)

    async def expire_overdue(self, now: datetime, limit: int) -> list[AgentLease]:
        overdue = (
            select(lease.c.id)
            .where(
                lease.c.state == LeaseState.ACTIVE.value,
                or_(lease.c.expires_at <= now, and_(lease.c.acked_at.is_(None), lease.c.ack_deadline <= now)),
            )
            .order_by(lease.c.expires_at, lease.c.id)
            .limit(limit)
        )
        if self._is_postgresql:
            overdue = overdue.with_for_update(skip_locked=True)
        ids = list((await self._conn.scalars(overdue)).all())
        if not ids:
            return []
        rows = await self._all(
            update(lease)
            .where(lease.c.id.in_(ids), lease.c.state == LeaseState.ACTIVE.value)
            .values(state=LeaseState.EXPIRED.value, updated_at=self._clock(), version=lease.c.version + 1)
            .returning(*lease.c)
        )
        return sorted((_LEASE.from_row(row) for row in rows), key=lambda l_: (l_.expires_at, l_.id))

    async def _fenced_update(
        self, fence: LeaseFence, now: datetime, extra: list[ColumnElement[bool]], **values: object
    ) -> AgentLease:
        row = await self._one(
            update(lease)
            .where(*_fenced(fence, now), *extra)
            .values(**values, updated_at=self._clock(), version=lease.c.version + 1)
            .returning(*lease.c)
        )
        if row is None:
            raise LeaseExpired(fence.lease_id)
        return _LEASE.from_row(row)
