"""The figures ``/metrics`` reads from the database every Service instance shares: runs per state and
provider, expired leases, live agents with their heartbeat, runs and outbox, and artifact bytes.

A handful of grouped counts on indexed columns, read on one pooled connection per scrape; none of them
scans run items or recipients.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from wepush.server.domain import AgentStatus, ArtifactState, LeaseState, OutboxState

from ._tables_agents import agent, agent_lease, agent_message_outbox
from ._tables_records import artifact
from ._tables_runs import run
from .engine import READ_ONLY_OPTION

__all__ = ["AgentFigures", "StoredFigures", "read_stored_figures"]

# Agents expected to report a heartbeat; one stopped cleanly or disabled is not, and its growing age
# would only set alerts off.
_REPORTING = (
    AgentStatus.STARTING,
    AgentStatus.CONNECTING,
    AgentStatus.ONLINE,
    AgentStatus.DRAINING,
    AgentStatus.DEGRADED,
)
_UNDELIVERED = (OutboxState.PENDING, OutboxState.SENT)


@dataclass(frozen=True, slots=True)
class AgentFigures:
    name: str
    heartbeat_age_s: float | None
    """Since the agent last reported; ``None`` when it never has."""
    active_runs: int
    outbox_size: int
    """Messages for the agent it has not acknowledged yet."""


@dataclass(frozen=True, slots=True)
class StoredFigures:
    runs: Mapping[tuple[str, str], int]
    """Runs per (state, provider id)."""
    expired_leases: int
    agents: tuple[AgentFigures, ...]
    """Agents that report a heartbeat, hold an active lease or have messages waiting."""
    artifact_bytes: Mapping[str, int]
    """Bytes of the complete (READY) artifacts per artifact type."""


async def read_stored_figures(engine: AsyncEngine, now: datetime) -> StoredFigures:
    async with engine.connect() as connection:
        connection = await connection.execution_options(**{READ_ONLY_OPTION: True})
        runs = await connection.execute(
            select(run.c.state, run.c.provider_id, func.count()).group_by(run.c.state, run.c.provider_id)
        )
        expired = await connection.scalar(
            select(func.count())
            .select_from(agent_lease)
            .where(agent_lease.c.state == LeaseState.EXPIRED.value)
        )
        active = _per_agent(
            await connection.execute(
                select(agent_lease.c.agent_id, func.count())
                .where(agent_lease.c.state == LeaseState.ACTIVE.value)
                .group_by(agent_lease.c.agent_id)
            )
        )
        waiting = _per_agent(
            await connection.execute(
                select(agent_message_outbox.c.agent_id, func.count())
                .where(agent_message_outbox.c.state.in_([s.value for s in _UNDELIVERED]))
                .group_by(agent_message_outbox.c.agent_id)
            )
        )
        conditions = [agent.c.status.in_([s.value for s in _REPORTING])]
        if active or waiting:
            conditions.append(agent.c.id.in_(set(active) | set(waiting)))
        agents = await connection.execute(
            select(agent.c.id, agent.c.display_name, agent.c.last_seen_at).where(or_(*conditions))
        )
        artifacts = await connection.execute(
            select(artifact.c.artifact_type, func.coalesce(func.sum(artifact.c.size_bytes), 0))
            .where(artifact.c.state == ArtifactState.READY.value)
            .group_by(artifact.c.artifact_type)
        )
        return StoredFigures(
            runs={(str(state), str(provider)): int(n) for state, provider, n in runs},
            expired_leases=int(expired or 0),
            agents=tuple(
                AgentFigures(
                    name=str(name),
                    heartbeat_age_s=None if seen is None else max(0.0, (now - seen).total_seconds()),
                    active_runs=int(active.get(agent_id, 0)),
                    outbox_size=int(waiting.get(agent_id, 0)),
                )
                for agent_id, name, seen in agents
            ),
            artifact_bytes={str(kind): int(size) for kind, size in artifacts},
        )


def _per_agent(rows: Iterable[Any]) -> dict[str, int]:
    return {str(agent_id): int(count) for agent_id, count in rows}
