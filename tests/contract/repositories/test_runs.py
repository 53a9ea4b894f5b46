"""Runs: conditional state transitions, idempotency keys, item results, resend sets, progress, commands."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import World, add_run, build_world
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    RESENDABLE_ITEM_STATES,
    DuplicateResource,
    ItemResult,
    ItemState,
    NotFound,
    PageRequest,
    Run,
    RunCommand,
    RunCommandState,
    RunCommandType,
    RunCounts,
    RunEventDraft,
    RunState,
    RunStateConflict,
    RunTrigger,
    VersionConflict,
    allowed_commands,
    hash_token,
    new_id,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory


@pytest.fixture
async def world(uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock) -> World:
    return await build_world(uow_factory, db_clock.now)


async def _move(uow_factory: SqlUnitOfWorkFactory, run: Run, *targets: RunState) -> Run:
    for target in targets:
        async with uow_factory() as uow:
            run = await uow.runs.transition(
                run.workspace_id, run.id, expected_version=run.version, target=target
            )
    return run


async def test_a_run_walks_the_happy_path_and_records_start_and_end(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    db_clock.advance(timedelta(seconds=10))
    running = await _move(uow_factory, run, RunState.LEASED, RunState.RUNNING)
    db_clock.advance(timedelta(seconds=10))
    paused = await _move(uow_factory, running, RunState.PAUSED, RunState.RUNNING)
    db_clock.advance(timedelta(seconds=10))
    done = await _move(uow_factory, paused, RunState.SUCCEEDED)

    assert running.started_at == run.created_at + timedelta(seconds=10)
    assert paused.started_at == running.started_at, "resuming must not restart the clock"
    assert done.ended_at == db_clock.now
    assert (done.state, done.version) == (RunState.SUCCEEDED, 6)
    async with uow_factory() as uow:
        assert await uow.runs.get(world.workspace.id, run.id) == done


@pytest.mark.parametrize(
    ("path", "target", "current"),
    [
        ([], RunState.RUNNING, RunState.PENDING),
        ([RunState.LEASED, RunState.RUNNING, RunState.SUCCEEDED], RunState.PAUSED, RunState.SUCCEEDED),
        ([RunState.CANCELLING, RunState.CANCELLED], RunState.LEASED, RunState.CANCELLED),
        # A cancel goes through CANCELLING, a PENDING run's too: its recipients are recorded UNSENT first.
        ([], RunState.CANCELLED, RunState.PENDING),
        ([RunState.LEASED, RunState.LOST], RunState.PENDING, RunState.LOST),
    ],
)
async def test_an_illegal_transition_is_a_run_state_conflict_naming_the_current_state(
    uow_factory: SqlUnitOfWorkFactory,
    db_clock: SteppingClock,
    world: World,
    path: list[RunState],
    target: RunState,
    current: RunState,
) -> None:
    run = await _move(uow_factory, await add_run(uow_factory, world, db_clock.now), *path)

    with pytest.raises(RunStateConflict) as conflict:
        async with uow_factory() as uow:
            await uow.runs.transition(world.workspace.id, run.id, expected_version=run.version, target=target)

    assert conflict.value.code == "RUN_STATE_CONFLICT"
    assert conflict.value.current_state is current
    assert conflict.value.allowed_commands == allowed_commands(current)
    assert current.value in str(conflict.value)
    async with uow_factory() as uow:
        assert (await uow.runs.get(world.workspace.id, run.id)).state is current


async def test_recovery_path_returns_a_lost_run_to_pending(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    back = await _move(
        uow_factory,
        run,
        RunState.LEASED,
        RunState.RUNNING,
        RunState.LOST,
        RunState.RECOVERING,
        RunState.PENDING,
    )
    assert back.state is RunState.PENDING
    # Queued again, it has not started: a cancel now is one before start, ended by the Service.
    assert back.started_at is None


async def test_transition_from_a_stale_version_is_a_version_conflict(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    running = await _move(
        uow_factory, await add_run(uow_factory, world, db_clock.now), RunState.LEASED, RunState.RUNNING
    )
    # Someone else paused and resumed meanwhile: same state, newer version.
    await _move(uow_factory, running, RunState.PAUSED, RunState.RUNNING)

    with pytest.raises(VersionConflict) as conflict:
        async with uow_factory() as uow:
            await uow.runs.transition(
                world.workspace.id, running.id, expected_version=running.version, target=RunState.PAUSED
            )
    assert conflict.value.expected_version == running.version


async def test_two_concurrent_cancels_of_one_version_succeed_once(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)

    async def cancel() -> Run | BaseException:
        try:
            async with uow_factory() as uow:
                return await uow.runs.transition(
                    world.workspace.id,
                    run.id,
                    expected_version=1,
                    target=RunState.CANCELLING,
                    reason="operator",
                )
        except (RunStateConflict, VersionConflict) as error:
            return error

    outcomes = await asyncio.gather(cancel(), cancel())
    winners = [o for o in outcomes if isinstance(o, Run)]
    losers = [o for o in outcomes if isinstance(o, RunStateConflict)]
    assert len(winners) == 1
    assert len(losers) == 1
    assert winners[0].state_reason == "operator"
    assert losers[0].current_state is RunState.CANCELLING


async def test_idempotency_key_creates_at_most_one_run_per_workspace(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    key = hash_token(f"schedule:s1:{db_clock.now.isoformat()}")
    first = await add_run(
        uow_factory, world, db_clock.now, idempotency_key_hash=key, trigger=RunTrigger.SCHEDULE
    )

    with pytest.raises(DuplicateResource):
        await add_run(uow_factory, world, db_clock.now, idempotency_key_hash=key, trigger=RunTrigger.SCHEDULE)
    async with uow_factory() as uow:
        found = await uow.runs.find_by_idempotency_key(world.workspace.id, key)
        unkeyed = [
            await uow.runs.add(replace(first, id=new_id(), idempotency_key_hash=None)) for _ in range(2)
        ]
    assert found == first
    assert len(unkeyed) == 2


async def test_item_results_are_idempotent_per_item_and_attempt(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    failed_once = ItemResult(
        item_id="i-1",
        sequence=1,
        state=ItemState.FAILED,
        attempt=1,
        error_category="TEMPORARY_REMOTE",
        provider_code="HTTP_503",
        finished_at=db_clock.now,
    )
    ok = ItemResult(
        item_id="i-2", sequence=2, state=ItemState.SUCCEEDED, attempt=1, external_request_id="r-2"
    )
    async with uow_factory() as uow:
        first = await uow.run_items.record_results(world.workspace.id, run.id, [failed_once, ok])
    async with uow_factory() as uow:
        replayed = await uow.run_items.record_results(world.workspace.id, run.id, [failed_once, ok])
        retried = await uow.run_items.record_results(
            world.workspace.id,
            run.id,
            [ItemResult(item_id="i-1", sequence=1, state=ItemState.SUCCEEDED, attempt=2)],
        )
        stale = await uow.run_items.record_results(world.workspace.id, run.id, [failed_once])
        item = await uow.run_items.get(run.id, "i-1")
        counts = await uow.run_items.count_by_state(run.id)

    assert (first, replayed, retried, stale) == (2, 0, 1, 0)
    assert item is not None
    assert (item.state, item.attempt, item.provider_code) == (ItemState.SUCCEEDED, 2, None)
    assert counts == {ItemState.SUCCEEDED: 2}


async def test_one_batch_reporting_several_attempts_keeps_the_latest(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    batch = [
        ItemResult(item_id="x", sequence=1, state=ItemState.FAILED, attempt=1),
        ItemResult(item_id="x", sequence=1, state=ItemState.UNKNOWN, attempt=3),
        ItemResult(item_id="x", sequence=1, state=ItemState.FAILED, attempt=2),
    ]
    async with uow_factory() as uow:
        assert await uow.run_items.record_results(world.workspace.id, run.id, batch) == 1
        item = await uow.run_items.get(run.id, "x")
    assert item is not None
    assert (item.state, item.attempt) == (ItemState.UNKNOWN, 3)


async def test_resend_set_contains_failed_unknown_and_unsent_items_of_the_source_run(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    source = await add_run(uow_factory, world, db_clock.now)
    states = [ItemState.SUCCEEDED, ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT, ItemState.SKIPPED]
    async with uow_factory() as uow:
        await uow.run_items.record_results(
            world.workspace.id,
            source.id,
            [ItemResult(item_id=f"i-{n}", sequence=n, state=s, attempt=1) for n, s in enumerate(states, 1)],
        )
    resend = await add_run(
        uow_factory, world, db_clock.advance(), source_run_id=source.id, trigger=RunTrigger.RESEND
    )
    async with uow_factory() as uow:
        size = await uow.run_items.create_retry_set(resend.id, source.id, RESENDABLE_ITEM_STATES)
        page = await uow.run_items.list_retry_items(resend.id, PageRequest(limit=2))
        rest = await uow.run_items.list_retry_items(resend.id, PageRequest(limit=2, after=page.next_after))
        failed = await uow.run_items.list_page(source.id, PageRequest(), states=[ItemState.FAILED])
    assert size == 3
    assert [(i.sequence, i.source_item_id) for i in page.items + rest.items] == [
        (2, "i-2"),
        (3, "i-3"),
        (4, "i-4"),
    ]
    assert [i.item_id for i in failed.items] == ["i-2"]


async def test_progress_is_stored_until_the_run_is_terminal(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await _move(
        uow_factory, await add_run(uow_factory, world, db_clock.now), RunState.LEASED, RunState.RUNNING
    )
    counts = RunCounts(total=2, succeeded=1, failed=1, retried=3)
    async with uow_factory() as uow:
        progressed = await uow.runs.record_progress(
            world.workspace.id, run.id, counts=counts, current_concurrency=7
        )
    assert (progressed.counts, progressed.current_concurrency, progressed.version) == (counts, 7, run.version)

    done = await _move(uow_factory, progressed, RunState.PARTIAL)
    with pytest.raises(RunStateConflict) as conflict:
        async with uow_factory() as uow:
            await uow.runs.record_progress(
                world.workspace.id, done.id, counts=RunCounts(), current_concurrency=0
            )
    assert conflict.value.current_state is RunState.PARTIAL


async def test_events_get_contiguous_per_run_sequences_even_from_concurrent_writers(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    other = await add_run(uow_factory, world, db_clock.now)

    async def append(run_id: str, label: str) -> list[int]:
        async with uow_factory() as uow:
            events = await uow.run_events.append(
                world.workspace.id,
                run_id,
                [
                    RunEventDraft(type="PROGRESS", occurred_at=db_clock.now, data={"by": label, "n": n})
                    for n in range(3)
                ],
            )
        return [e.sequence for e in events]

    results = await asyncio.gather(append(run.id, "a"), append(run.id, "b"), append(other.id, "c"))
    async with uow_factory() as uow:
        stored = await uow.run_events.list_page(run.id, PageRequest(limit=100))
        refreshed = await uow.runs.get(world.workspace.id, run.id)
        first = await uow.run_events.first_sequence(run.id)
    assert sorted(results[0] + results[1]) == [1, 2, 3, 4, 5, 6]
    assert results[2] == [1, 2, 3]
    assert [e.sequence for e in stored.items] == [1, 2, 3, 4, 5, 6]
    assert refreshed.last_event_sequence == 6
    assert first == 1


async def test_the_latest_event_of_a_type_is_found_per_run(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    other = await add_run(uow_factory, world, db_clock.now)
    async with uow_factory() as uow:
        await uow.run_events.append(
            world.workspace.id,
            run.id,
            [
                RunEventDraft(type="PROGRESS", occurred_at=db_clock.now, data={"inFlight": 4}),
                RunEventDraft(type="PROGRESS", occurred_at=db_clock.now, data={"inFlight": 2}),
                RunEventDraft(type="RUN_PAUSED", occurred_at=db_clock.now, data={}),
            ],
        )
    async with uow_factory(read_only=True) as uow:
        latest = await uow.run_events.latest(run.id, "PROGRESS")
        none_yet = await uow.run_events.latest(other.id, "PROGRESS")
    assert latest is not None
    assert (latest.sequence, latest.data) == (2, {"inFlight": 2})
    assert none_yet is None


async def test_old_events_are_purged_and_the_cursor_start_moves(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    old = db_clock.now - timedelta(days=31)
    async with uow_factory() as uow:
        await uow.run_events.append(
            world.workspace.id,
            run.id,
            [RunEventDraft(type="PROGRESS", occurred_at=old, data={}) for _ in range(3)]
            + [RunEventDraft(type="RUN_COMPLETED", occurred_at=db_clock.now, data={"state": "SUCCEEDED"})],
        )
        purged = await uow.run_events.purge_before(db_clock.now - timedelta(days=30), limit=2)
        first = await uow.run_events.first_sequence(run.id)
    assert (purged, first) == (2, 3)


async def test_appending_to_a_missing_run_is_not_found(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    with pytest.raises(NotFound):
        async with uow_factory() as uow:
            await uow.run_events.append(
                world.workspace.id, "missing", [RunEventDraft(type="X", occurred_at=db_clock.now)]
            )


async def test_commands_are_unique_by_id_and_acknowledged_once(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)
    command = RunCommand(
        workspace_id=world.workspace.id,
        run_id=run.id,
        command_id="cmd-1",
        type=RunCommandType.CHANGE_CONCURRENCY,
        payload={"target": 50},
        created_at=db_clock.now,
        updated_at=db_clock.now,
    )
    async with uow_factory() as uow:
        await uow.run_commands.add(command)
    with pytest.raises(DuplicateResource):
        async with uow_factory() as uow:
            await uow.run_commands.add(command)

    async with uow_factory() as uow:
        delivered = await uow.run_commands.mark_delivered("cmd-1", agent_sequence=7)
        applied = await uow.run_commands.record_ack("cmd-1", applied=True, result_message=None)
        late_reject = await uow.run_commands.record_ack("cmd-1", applied=False, result_message="too late")
        redelivered = await uow.run_commands.mark_delivered("cmd-1", agent_sequence=9)
        listed = await uow.run_commands.list_for_run(run.id, PageRequest())
    assert (delivered.state, delivered.agent_sequence) == (RunCommandState.DELIVERED, 7)
    assert applied.state is RunCommandState.APPLIED
    assert applied.acknowledged_at == db_clock.now
    assert late_reject == applied
    assert redelivered == applied
    assert [c.payload for c in listed.items] == [{"target": 50}]


async def test_a_final_result_settles_an_in_flight_item_of_the_same_attempt(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, world: World
) -> None:
    run = await add_run(uow_factory, world, db_clock.now)

    def result(state: ItemState) -> ItemResult:
        return ItemResult(item_id="x", sequence=1, state=state, attempt=1)

    async with uow_factory() as uow:
        written = [
            await uow.run_items.record_results(world.workspace.id, run.id, [result(state)])
            for state in (ItemState.IN_FLIGHT, ItemState.UNKNOWN, ItemState.SUCCEEDED)
        ]
        item = await uow.run_items.get(run.id, "x")
    assert written == [1, 1, 0]
    assert item is not None
    assert item.state is ItemState.UNKNOWN
