"""Agents: one-time enrollment, heartbeats that never conflict with edits, the per-agent outbox."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import add_workspace
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Agent,
    AgentStatus,
    EnrollmentToken,
    OutboxState,
    PageRequest,
    VersionConflict,
    Workspace,
    hash_token,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


@pytest.fixture
async def workspace(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> Workspace:
    return await add_workspace(uow_factory, db_clock.now)


async def _agent(
    uow_factory: SqlUnitOfWorkFactory,
    workspace: Workspace,
    clock: SteppingClock,
    credential: str = "agent-credential",
) -> Agent:
    agent = Agent(
        workspace_id=workspace.id,
        display_name="worker-shanghai-01",
        agent_version="0.1.0",
        platform={"os": "linux", "arch": "x86_64", "python": "3.11"},
        providers=[{"id": "wepush.http", "version": "1.0.0", "spi": "1"}],
        capacity={"maxRuns": 2, "maxConcurrency": 200},
        credential_hash=hash_token(credential),
        created_at=clock.now,
        updated_at=clock.now,
    )
    async with uow_factory() as uow:
        await uow.agents.add(agent)
    return agent


async def test_an_enrollment_token_is_consumed_exactly_once_even_when_raced(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    token = EnrollmentToken(
        workspace_id=workspace.id,
        token_hash=hash_token("one-time"),
        expires_at=db_clock.now + timedelta(hours=1),
        created_by="admin",
        created_at=db_clock.now,
        updated_at=db_clock.now,
    )
    expired = replace(token, id="expired-token", token_hash=hash_token("old"), expires_at=db_clock.now)
    async with uow_factory() as uow:
        await uow.agents.add_enrollment_token(token)
        await uow.agents.add_enrollment_token(expired)

    async def enroll() -> EnrollmentToken | None:
        async with uow_factory() as uow:
            return await uow.agents.consume_enrollment_token(hash_token("one-time"), db_clock.now)

    outcomes = await asyncio.gather(enroll(), enroll())
    async with uow_factory() as uow:
        late = await uow.agents.consume_enrollment_token(hash_token("old"), db_clock.now)
    used = [o for o in outcomes if o is not None]
    assert len(used) == 1
    assert used[0].used_at == db_clock.now
    assert late is None


async def test_agent_round_trips_and_heartbeats_do_not_bump_the_version(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    agent = await _agent(uow_factory, workspace, db_clock)
    db_clock.advance()
    async with uow_factory() as uow:
        await uow.agents.record_heartbeat(
            agent.id, status=AgentStatus.ONLINE, seen_at=db_clock.now, capacity={"maxRuns": 4}
        )
        seen = await uow.agents.get(workspace.id, agent.id)
        by_credential = await uow.agents.find_by_credential_hash(hash_token("agent-credential"))
        renamed = await uow.agents.update(replace(seen, display_name="worker-02"))

    assert (seen.status, seen.last_seen_at, seen.version) == (AgentStatus.ONLINE, db_clock.now, 1)
    assert seen.capacity == {"maxRuns": 4}
    assert seen.platform == agent.platform
    assert seen.providers == agent.providers
    assert by_credential == seen
    assert renamed.version == 2
    assert "agent-credential" not in repr(seen)
    assert seen.credential_hash is not None
    assert seen.credential_hash not in repr(seen)


async def test_a_disabled_agent_stays_disabled_whatever_it_reports(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    agent = await _agent(uow_factory, workspace, db_clock)
    async with uow_factory() as uow:
        await uow.agents.update(replace(agent, status=AgentStatus.DISABLED, disabled_at=db_clock.now))
        await uow.agents.record_heartbeat(agent.id, status=AgentStatus.ONLINE, seen_at=db_clock.now)
        stored = await uow.agents.get(workspace.id, agent.id)
        listed = await uow.agents.list_page(workspace.id, PageRequest(), statuses=[AgentStatus.ONLINE])
    assert stored.status is AgentStatus.DISABLED
    assert listed.items == []
    with pytest.raises(VersionConflict):
        async with uow_factory() as uow:
            await uow.agents.update(replace(agent, display_name="stale"))


async def test_outbox_sequences_are_monotonic_per_agent_and_acks_close_messages(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, workspace: Workspace
) -> None:
    agent = await _agent(uow_factory, workspace, db_clock)
    other = await _agent(uow_factory, workspace, db_clock, credential="other-credential")

    async def enqueue(agent_id: str, kind: str) -> int:
        async with uow_factory() as uow:
            message = await uow.agent_outbox.enqueue(workspace.id, agent_id, kind, {"kind": kind})
        return message.sequence

    sequences = await asyncio.gather(*(enqueue(agent.id, f"LEASE_OFFER_{n}") for n in range(4)))
    assert sorted(sequences) == [1, 2, 3, 4]
    assert await enqueue(other.id, "RUN_COMMAND") == 1

    async with uow_factory() as uow:
        assert await uow.agent_outbox.mark_sent(agent.id, [1, 2], db_clock.now) == 2
        acked = await uow.agent_outbox.acknowledge_through(agent.id, 2)
        pending = await uow.agent_outbox.unacknowledged(agent.id)
        after_three = await uow.agent_outbox.unacknowledged(agent.id, after_sequence=3)
    assert acked == 2
    assert [m.sequence for m in pending] == [3, 4]
    assert all(m.state is OutboxState.PENDING for m in pending)
    assert [m.sequence for m in after_three] == [4]

    db_clock.advance(timedelta(hours=1))
    async with uow_factory() as uow:
        purged = await uow.agent_outbox.purge_acknowledged(db_clock.now, limit=10)
        remaining = await uow.agent_outbox.unacknowledged(agent.id)
    assert purged == 2
    assert [m.sequence for m in remaining] == [3, 4]
