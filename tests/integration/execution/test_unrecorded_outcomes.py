"""A run whose engine stopped with outcomes it could not record (its result sink gave up: the engine drops
what it could not append) is not ended with the engine's counts: the executor first stores the outcomes
it still holds, settles every other recipient without a row as a recovery would (UNKNOWN up to the
dispatch mark, UNSENT beyond it), writes the result files anew, and ends the run with the counts its
item rows hold. A resend of UNSENT then finds exactly the recipients nothing was sent to."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.helpers_uow import InterceptedUnit, InterceptingUnitOfWork, Proceed, Statement
from tests.integration.execution._world import (
    World,
    artifacts_of,
    build_world,
    claim_run,
    create_run,
    events_of,
    jsonl,
    load_run,
)
from wepush.agent.engine import EngineOptions, ExecutionEngine, RecipientRecord
from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import (
    ArtifactDownloads,
    ExecutionContext,
    ExecutionLedger,
    RecipientScope,
    RunExecution,
)
from wepush.server.domain import (
    ArtifactState,
    ItemState,
    LeaseFence,
    LeaseState,
    Page,
    PageRequest,
    Run,
    RunState,
    utc_now,
)
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqliteExecutionLedger, SqlUnitOfWorkFactory, execution_ledger
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

RECIPIENTS = 250
BATCH = 100


class RefusingLedger:
    """The run's ledger, except that once one batch of results is stored every further one is refused
    (not an outage: the engine gives up on it) until ``heal``."""

    def __init__(self, inner: ExecutionLedger) -> None:
        self._inner = inner
        self._stored = 0
        self.healed = False
        self.refused: set[str] = set()
        """Item ids of every refused batch."""

    def heal(self) -> None:
        self.healed = True

    async def read_records(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[RecipientRecord, int]:
        return await self._inner.read_records(scope, after, limit)

    async def mark_dispatched(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, through_sequence: int
    ) -> None:
        await self._inner.mark_dispatched(fence, now, workspace_id, run_id, through_sequence)

    async def record_results(
        self,
        fence: LeaseFence,
        now: datetime,
        workspace_id: str,
        run_id: str,
        results: Sequence[EngineItemResult],
    ) -> None:
        if self._stored and not self.healed:
            self.refused |= {r.item_id for r in results}
            raise RuntimeError("the results table refuses this batch")
        await self._inner.record_results(fence, now, workspace_id, run_id, results)
        self._stored += 1


class _CountSpy(InterceptingUnitOfWork):
    """The unit of work, telling ``counted`` when the run's outcomes are counted: the run is ending."""

    def __init__(self, inner: SqlUnitOfWorkFactory, counted: Callable[[], None]) -> None:
        super().__init__(inner, statements=[("run_items", "count_by_state")])
        self._counted = counted

    async def around(self, unit: InterceptedUnit, statement: Statement, proceed: Proceed) -> Any:
        self._counted()
        return await proceed()


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(
        uow,
        secret_store,
        recipients=RECIPIENTS,
        policies={"concurrency": {"min": 1, "max": 8, "target": 8}, "retry": {"maxAttempts": 1}},
    )


async def _items(uow: SqlUnitOfWorkFactory, run: Run) -> dict[str, tuple[int, ItemState]]:
    async with uow(read_only=True) as unit:
        page = await unit.run_items.list_page(run.id, PageRequest(limit=1000))
    return {item.item_id: (item.sequence, item.state) for item in page.items}


async def test_a_run_whose_results_could_not_be_recorded_ends_with_a_row_behind_every_count(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    world: World,
) -> None:
    run = await create_run(uow, world)
    claimed = await claim_run(uow, world, run)
    inner = execution_ledger(uow)
    ledger = RefusingLedger(inner)
    provider = FakeProviderFactory()
    engine = ExecutionEngine(
        ProviderCatalog.from_factories([provider]).get,
        EngineOptions(
            read_batch_size=10,
            read_low_water=5,
            result_batch_size=BATCH,
            # Dispatch waits while a batch is being appended: the engine stops before it has sent everyone.
            result_high_water=BATCH,
            sink_retry_attempts=2,
            sink_retry_initial_delay=timedelta(milliseconds=1),
            sink_retry_max_delay=timedelta(milliseconds=1),
        ),
    )
    context = ExecutionContext(
        uow=_CountSpy(uow, ledger.heal),
        engine=engine,
        artifact_store=artifact_store,
        secret_store=secret_store,
        clock=utc_now,
        ledger=ledger,
    )
    execution = RunExecution(context, claimed, await load_run(uow, run))
    try:
        await execution.execute()
    finally:
        if isinstance(inner, SqliteExecutionLedger):
            inner.close()

    done = await load_run(uow, run)
    assert done.state is RunState.PARTIAL, done.state_reason
    assert ledger.refused, "the engine never met a refused batch"
    sent = Counter(call.recipient.sequence for call in provider.calls)
    assert set(sent.values()) == {1}
    items = await _items(uow, done)
    # A row for every recipient, and the run's counts are those rows.
    assert sorted(sequence for sequence, _ in items.values()) == list(range(1, RECIPIENTS + 1))
    rows = Counter(state for _, state in items.values())
    c = done.counts
    assert (c.total, c.succeeded, c.unknown, c.unsent, c.failed) == (
        RECIPIENTS,
        rows[ItemState.SUCCEEDED],
        rows[ItemState.UNKNOWN],
        rows[ItemState.UNSENT],
        0,
    )
    # The outcomes the engine could not record were kept and stored: sent and SUCCEEDED, not UNKNOWN.
    kept = [items[item_id] for item_id in ledger.refused if item_id in items]
    assert kept
    assert all(state is ItemState.SUCCEEDED for _, state in kept)
    # Sent means SUCCEEDED or (dropped by the engine) UNKNOWN; UNSENT was never sent.
    unsent = {sequence for sequence, state in items.values() if state is ItemState.UNSENT}
    assert c.unsent == len(unsent) > 0
    assert not unsent & sent.keys()
    assert {s for s, state in items.values() if state is ItemState.SUCCEEDED} <= sent.keys()
    # The engine's own end is not taken over unchanged: its event says what the rows say.
    completed = [e for e in await events_of(uow, done) if e.type == "RUN_COMPLETED"]
    assert [e.data["counts"]["unsent"] for e in completed] == [c.unsent]
    assert completed[0].data["finalState"] == RunState.PARTIAL.value
    # The executor ended the run itself, with its lease.
    async with uow(read_only=True) as unit:
        lease = await unit.leases.get(claimed.lease.id)
    assert lease.state is LeaseState.RELEASED
    # The result files are written anew from the rows: one line per recipient of each outcome.
    artifacts = await artifacts_of(uow, done)
    assert all(a.state is ArtifactState.READY for a in artifacts.values())
    downloads = ArtifactDownloads(uow, artifact_store)
    for kind, state in (
        ("SUCCEEDED_ITEMS", ItemState.SUCCEEDED),
        ("UNKNOWN_ITEMS", ItemState.UNKNOWN),
        ("UNSENT_ITEMS", ItemState.UNSENT),
    ):
        if not rows[state]:
            continue
        opened = await downloads.open_artifact(done.workspace_id, done.id, artifacts[kind].id)
        lines = jsonl(b"".join([chunk async for chunk in opened.chunks]))
        assert sorted(json.loads(line)["sequence"] for line in lines) == sorted(
            s for s, st in items.values() if st is state
        )
    log = await downloads.open_artifact(done.workspace_id, done.id, artifacts["RUN_LOG"].id)
    assert b"OUTCOMES_SETTLED" in b"".join([chunk async for chunk in log.chunks])
