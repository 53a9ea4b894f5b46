"""Agents, one-time enrollment tokens and the Service→Agent message outbox."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, insert, select, update

from wepush.server.domain import (
    Agent,
    AgentStatus,
    DuplicateResource,
    EnrollmentToken,
    JsonObject,
    Keyset,
    NotFound,
    OutboxMessage,
    OutboxState,
    Page,
    PageRequest,
)

from ._base import SqlRepository
from ._mapping import RowMapper
from ._tables_agents import agent, agent_enrollment_token, agent_message_outbox

_AGENT = RowMapper(
    Agent,
    agent,
    renames={"platform": "platform_json", "providers": "providers_json", "capacity": "capacity_json"},
)
_ENROLLMENT = RowMapper(EnrollmentToken, agent_enrollment_token)
_OUTBOX = RowMapper(OutboxMessage, agent_message_outbox, renames={"payload": "payload_json"})


class SqlAgentRepository(SqlRepository):
    async def add(self, agent_: Agent) -> Agent:
        await self._insert(
            agent,
            _AGENT.to_values(agent_) | {"last_outbox_sequence": 0},
            lambda: DuplicateResource("agent", "credential"),
        )
        return agent_

    async def get(self, workspace_id: str, agent_id: str) -> Agent:
        return _AGENT.from_row(
            await self._get_row(agent, "agent", agent_id, agent.c.workspace_id == workspace_id)
        )

    async def find_by_credential_hash(self, credential_hash: str) -> Agent | None:
        row = await self._one(select(agent).where(agent.c.credential_hash == credential_hash))
        return None if row is None else _AGENT.from_row(row)

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        statuses: Collection[AgentStatus] | None = None,
    ) -> Page[Agent, Keyset]:
        stmt = select(agent).where(agent.c.workspace_id == workspace_id)
        if statuses is not None:
            stmt = stmt.where(agent.c.status.in_([s.value for s in statuses]))
        return await self._keyset_page(
            stmt,
            page,
            at=agent.c.created_at,
            id_=agent.c.id,
            build=_AGENT.from_row,
            key=lambda a: Keyset(a.created_at, a.id),
        )

    async def update(self, agent_: Agent) -> Agent:
        row = await self._update_versioned(
            agent,
            "agent",
            agent_.id,
            agent_.version,
            _AGENT.to_values(agent_),
            agent.c.workspace_id == agent_.workspace_id,
            on_duplicate=lambda: DuplicateResource("agent", "credential"),
        )
        return _AGENT.from_row(row)

    async def record_heartbeat(
        self, agent_id: str, *, status: AgentStatus, seen_at: datetime, capacity: JsonObject | None = None
    ) -> None:
        values: dict[str, Any] = {
            "last_seen_at": seen_at,
            "status": case((agent.c.disabled_at.is_(None), status.value), else_=AgentStatus.DISABLED.value),
        }
        if capacity is not None:
            values["capacity_json"] = capacity
        result = await self._conn.execute(update(agent).where(agent.c.id == agent_id).values(**values))
        if result.rowcount == 0:
            raise NotFound("agent", agent_id)

    async def add_enrollment_token(self, token: EnrollmentToken) -> EnrollmentToken:
        await self._insert(
            agent_enrollment_token,
            _ENROLLMENT.to_values(token),
            lambda: DuplicateResource("agent_enrollment_token", "token hash"),
        )
        return token

    async def consume_enrollment_token(self, token_hash: str, now: datetime) -> EnrollmentToken | None:
        t = agent_enrollment_token
        row = await self._one(
            update(t)
            .where(t.c.token_hash == token_hash, t.c.used_at.is_(None), t.c.expires_at > now)
            .values(used_at=now, updated_at=self._clock(), version=t.c.version + 1)
            .returning(*t.c)
        )
        return None if row is None else _ENROLLMENT.from_row(row)


class SqlAgentOutboxRepository(SqlRepository):
    async def enqueue(
        self, workspace_id: str, agent_id: str, kind: str, payload: JsonObject
    ) -> OutboxMessage:
        sequence = await self._conn.scalar(
            update(agent)
            .where(agent.c.id == agent_id, agent.c.workspace_id == workspace_id)
            .values(last_outbox_sequence=agent.c.last_outbox_sequence + 1)
            .returning(agent.c.last_outbox_sequence)
        )
        if sequence is None:
            raise NotFound("agent", agent_id)
        now = self._clock()
        message = OutboxMessage(
            workspace_id=workspace_id,
            agent_id=agent_id,
            sequence=int(sequence),
            kind=kind,
            payload=payload,
            created_at=now,
            updated_at=now,
        )
        await self._conn.execute(insert(agent_message_outbox).values(**_OUTBOX.to_values(message)))
        return message

    async def unacknowledged(
        self, agent_id: str, *, after_sequence: int = 0, limit: int = 100
    ) -> list[OutboxMessage]:
        o = agent_message_outbox
        rows = await self._all(
            select(o)
            .where(
                o.c.agent_id == agent_id,
                o.c.sequence > after_sequence,
                o.c.state.in_([OutboxState.PENDING.value, OutboxState.SENT.value]),
            )
            .order_by(o.c.sequence)
            .limit(limit)
        )
        return [_OUTBOX.from_row(row) for row in rows]

    async def mark_sent(self, agent_id: str, sequences: Sequence[int], sent_at: datetime) -> int:
        if not sequences:
            return 0
        o = agent_message_outbox
        result = await self._conn.execute(
            update(o)
            .where(
                o.c.agent_id == agent_id,
                o.c.sequence.in_(list(sequences)),
                o.c.state.in_([OutboxState.PENDING.value, OutboxState.SENT.value]),
            )
            .values(state=OutboxState.SENT.value, sent_at=sent_at, updated_at=self._clock())
        )
        return int(result.rowcount)

    async def acknowledge_through(self, agent_id: str, sequence: int) -> int:
        o = agent_message_outbox
        result = await self._conn.execute(
            update(o)
            .where(o.c.agent_id == agent_id, o.c.sequence <= sequence, o.c.state != OutboxState.ACKED.value)
            .values(state=OutboxState.ACKED.value, updated_at=self._clock(), version=o.c.version + 1)
        )
        return int(result.rowcount)

    async def purge_acknowledged(self, before: datetime, limit: int) -> int:
        o = agent_message_outbox
        doomed = (
            select(o.c.id)
            .where(o.c.state == OutboxState.ACKED.value, o.c.updated_at < before)
            .order_by(o.c.updated_at)
            .limit(limit)
        )
        result = await self._conn.execute(delete(o).where(o.c.id.in_(doomed)))
        return int(result.rowcount)
