"""Leases: one ACTIVE lease per run under concurrent claims, epochs, fencing tokens, expiry."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.contract.repositories._world import World, add_run, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Agent,
    ClaimedLease,
    FencingToken,
    LeaseExpired,
    LeaseFence,
    LeaseState,
    PageRequest,
    Run,
    RunEventDraft,
    RunState,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory

TTL = timedelta(seconds=30)
ACK = timedelta(seconds=10)


@pytest.fixture
async def world(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> World:
    return await build_world(uow_factory, db_clock.now)


async def _agent(uow_factory: SqlUnitOfWorkFactory, world: World, clock: SteppingClock, name: str) -> Agent:
    agent = Agent(
        workspace_id=world.workspace.id,
        display_name=name,
        agent_version="0.1.0",
        created_at=clock.now,
        updated_at=clock.now,
    )
    async with uow_factory() as uow:
        await uow.agents.add(agent)
    return agent


async def _claim(
    uow_factory: SqlUnitOfWorkFactory, run: Run, agent: Agent, clock: SteppingClock
) -> ClaimedLease | None:
    async with uow_factory() as uow:
        return await uow.leases.claim(
            run.workspace_id, run.id, agent.id, expires_at=clock.now + TTL, ack_deadline=clock.now + ACK
        )


async def _events(n: int, clock: SteppingClock) -> list[RunEventDraft]:
    return [RunEventDraft(type="PROGRESS", occurred_at=clock.now, data={"n": i}) for i in range(n)]


async def test_concurrent_claims_produce_one_active_lease_and_one_valid_fencing_token(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World, database_backend: str
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    agents = [await _agent(uow_factory, world, db_clock, f"worker-{n}") for n in range(2)]
    # On PostgreSQL both transactions are open before either claims, so the claims truly overlap.
    # SQLite admits one writer at a time (BEGIN IMMEDIATE): the second transaction waits to start.
    both_open = asyncio.Barrier(2) if database_backend == "postgresql" else None

    async def claim(agent: Agent) -> ClaimedLease | None:
        async with uow_factory() as uow:
            if both_open is not None:
                await both_open.wait()
            return await uow.leases.claim(
                run.workspace_id,
                run.id,
                agent.id,
                expires_at=db_clock.now + TTL,
                ack_deadline=db_clock.now + ACK,
            )

    outcomes = await asyncio.gather(*(claim(agent) for agent in agents))

    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1
    winner = winners[0]
    async with uow_factory() as uow:
        active = await uow.leases.find_active(run.id)
        leased_run = await uow.runs.get(world.workspace.id, run.id)
        held = await uow.leases.check(winner.fence, db_clock.now)
        forged = LeaseFence(winner.lease.id, winner.lease.epoch, FencingToken.generate())
        with pytest.raises(LeaseExpired):
            await uow.leases.check(forged, db_clock.now)
        losers_leases = [
            lease
            for agent in agents
            for lease in await uow.leases.list_for_agent(agent.id, active_only=False)
        ]
    assert active == winner.lease == held
    assert (active.epoch, active.state) == (1, LeaseState.ACTIVE)
    assert len(losers_leases) == 1
    assert leased_run.state is RunState.LEASED
    assert winner.lease.fencing_token_hash == winner.token.hash
    assert winner.token.reveal() not in repr(winner)


async def test_claim_next_hands_different_runs_to_concurrent_agents(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World, database_backend: str
) -> None:
    runs = [await add_run(uow_factory, world, db_clock.advance()) for _ in range(2)]
    other_provider = await add_run(uow_factory, world, db_clock.advance(), provider_id="wepush.smtp")
    agents = [await _agent(uow_factory, world, db_clock, f"worker-{n}") for n in range(3)]
    # Overlapping PostgreSQL transactions must still hand out each run once (SQLite serializes writers).
    all_open = asyncio.Barrier(3) if database_backend == "postgresql" else None

    async def claim_next(agent: Agent) -> ClaimedLease | None:
        async with uow_factory() as uow:
            if all_open is not None:
                await all_open.wait()
            return await uow.leases.claim_next(
                world.workspace.id,
                agent.id,
                expires_at=db_clock.now + TTL,
                ack_deadline=db_clock.now + ACK,
                provider_ids=["wepush.http"],
            )

    outcomes = await asyncio.gather(*(claim_next(agent) for agent in agents))
    claimed = sorted(o.lease.run_id for o in outcomes if o is not None)
    assert claimed == sorted(r.id for r in runs)
    assert outcomes.count(None) == 1
    async with uow_factory() as uow:
        assert (await uow.runs.get(world.workspace.id, other_provider.id)).state is RunState.PENDING


async def test_writes_with_an_old_epoch_or_token_are_rejected_after_a_new_lease(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    old_agent, new_agent = [await _agent(uow_factory, world, db_clock, f"a{n}") for n in range(2)]
    first = await _claim(uow_factory, run, old_agent, db_clock)
    assert first is not None

    # The first agent never acknowledges: its offer expires and the run goes round the recovery path.
    db_clock.advance(ACK + timedelta(seconds=1))
    async with uow_factory() as uow:
        expired = await uow.leases.expire_overdue(db_clock.now, limit=10)
        current = await uow.runs.get(world.workspace.id, run.id)
        for target in (RunState.LOST, RunState.RECOVERING, RunState.PENDING):
            current = await uow.runs.transition(
                world.workspace.id, run.id, expected_version=current.version, target=target
            )
    assert [lease.id for lease in expired] == [first.lease.id]
    assert expired[0].state is LeaseState.EXPIRED

    second = await _claim(uow_factory, current, new_agent, db_clock)
    assert second is not None
    assert second.lease.epoch == 2

    stale_fences = [
        first.fence,
        LeaseFence(second.lease.id, 1, second.token),
        LeaseFence(second.lease.id, 2, first.token),
    ]
    for fence in stale_fences:
        async with uow_factory() as uow:
            with pytest.raises(LeaseExpired) as rejected:
                await uow.leases.renew(fence, db_clock.now, expires_at=db_clock.now + TTL)
            assert rejected.value.code == "LEASE_EXPIRED"
            with pytest.raises(LeaseExpired):
                await uow.leases.accept_event_batch(
                    fence, db_clock.now, first_sequence=1, events=await _events(1, db_clock)
                )
            with pytest.raises(LeaseExpired):
                await uow.leases.acknowledge(fence, db_clock.now)

    async with uow_factory() as uow:
        acked = await uow.leases.acknowledge(second.fence, db_clock.now)
        renewed = await uow.leases.renew(second.fence, db_clock.now, expires_at=db_clock.now + 2 * TTL)
        events = await uow.run_events.list_page(run.id, PageRequest())
    assert acked.acked_at == db_clock.now
    assert renewed.expires_at == db_clock.now + 2 * TTL
    assert events.items == [], "no stale write reached the run's history"


async def test_acknowledging_twice_is_harmless_but_late_acknowledgement_is_refused(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    agent = await _agent(uow_factory, world, db_clock, "a")
    on_time = await _claim(uow_factory, await add_run(uow_factory, world, db_clock.now), agent, db_clock)
    late = await _claim(uow_factory, await add_run(uow_factory, world, db_clock.now), agent, db_clock)
    assert on_time is not None
    assert late is not None

    db_clock.advance(timedelta(seconds=1))
    async with uow_factory() as uow:
        first = await uow.leases.acknowledge(on_time.fence, db_clock.now)
    db_clock.advance(ACK)
    async with uow_factory() as uow:
        again = await uow.leases.acknowledge(on_time.fence, db_clock.now)
        with pytest.raises(LeaseExpired):
            await uow.leases.acknowledge(late.fence, db_clock.now)
    assert again.acked_at == first.acked_at


async def test_a_lease_past_its_expiry_rejects_writes_and_is_expired_by_the_sweep(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    agent = await _agent(uow_factory, world, db_clock, "a")
    claimed = await _claim(uow_factory, await add_run(uow_factory, world, db_clock.now), agent, db_clock)
    assert claimed is not None
    async with uow_factory() as uow:
        await uow.leases.acknowledge(claimed.fence, db_clock.now)
        assert await uow.leases.expire_overdue(db_clock.now, limit=10) == []

    db_clock.advance(TTL)
    async with uow_factory() as uow:
        with pytest.raises(LeaseExpired):
            await uow.leases.check(claimed.fence, db_clock.now)
        swept = await uow.leases.expire_overdue(db_clock.now, limit=10)
        assert await uow.leases.find_active(claimed.lease.run_id) is None
    assert [lease.state for lease in swept] == [LeaseState.EXPIRED]


async def test_event_batches_are_deduplicated_by_agent_sequence(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    agent = await _agent(uow_factory, world, db_clock, "a")
    claimed = await _claim(uow_factory, run, agent, db_clock)
    assert claimed is not None
    async with uow_factory() as uow:
        await uow.run_events.append(world.workspace.id, run.id, await _events(1, db_clock))

    batch = await _events(3, db_clock)
    async with uow_factory() as uow:
        first = await uow.leases.accept_event_batch(
            claimed.fence, db_clock.now, first_sequence=1, events=batch
        )
    async with uow_factory() as uow:
        redelivered = await uow.leases.accept_event_batch(
            claimed.fence, db_clock.now, first_sequence=1, events=batch
        )
        overlapping = await uow.leases.accept_event_batch(
            claimed.fence, db_clock.now, first_sequence=3, events=await _events(2, db_clock)
        )
        gap = await uow.leases.accept_event_batch(
            claimed.fence, db_clock.now, first_sequence=9, events=await _events(1, db_clock)
        )
        history = await uow.run_events.list_page(run.id, PageRequest(limit=100))
        lease = await uow.leases.get(claimed.lease.id)

    assert ([e.sequence for e in first.appended], first.acked_sequence) == ([2, 3, 4], 3)
    assert (redelivered.appended, redelivered.acked_sequence) == ([], 3)
    assert ([e.sequence for e in overlapping.appended], overlapping.acked_sequence) == ([5], 4)
    assert (gap.appended, gap.acked_sequence, gap.gap) == ([], 4, True)
    assert [e.sequence for e in history.items] == [1, 2, 3, 4, 5]
    assert lease.last_event_sequence == 4


async def test_released_and_revoked_leases_reject_further_writes(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    agent = await _agent(uow_factory, world, db_clock, "a")
    done = await _claim(uow_factory, await add_run(uow_factory, world, db_clock.now), agent, db_clock)
    revoked = await _claim(uow_factory, await add_run(uow_factory, world, db_clock.now), agent, db_clock)
    assert done is not None
    assert revoked is not None

    async with uow_factory() as uow:
        released = await uow.leases.release(done.fence, db_clock.now)
        released_again = await uow.leases.release(done.fence, db_clock.now)
        revoked_lease = await uow.leases.revoke(revoked.lease.id)
        revoked_again = await uow.leases.revoke(revoked.lease.id)
    assert released.state is LeaseState.RELEASED
    assert released_again == released
    assert revoked_lease is not None
    assert revoked_lease.state is LeaseState.REVOKED
    assert revoked_again is None

    for fence in (done.fence, revoked.fence):
        with pytest.raises(LeaseExpired):
            async with uow_factory() as uow:
                await uow.leases.renew(fence, db_clock.now, expires_at=db_clock.now + TTL)
    async with uow_factory() as uow:
        assert await uow.leases.list_for_agent(agent.id) == []
        assert len(await uow.leases.list_for_agent(agent.id, active_only=False)) == 2


async def test_a_run_that_is_not_pending_cannot_be_claimed(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    agent = await _agent(uow_factory, world, db_clock, "a")
    run = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        await uow.runs.transition(
            world.workspace.id, run.id, expected_version=run.version, target=RunState.CANCELLING
        )
    assert await _claim(uow_factory, run, agent, db_clock) is None
    async with uow_factory() as uow:
        assert await uow.leases.find_active(run.id) is None
