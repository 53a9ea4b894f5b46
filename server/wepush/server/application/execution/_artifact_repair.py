"""Outcome files a finished run lost, written again from its stored item results.

A run keeps sending while its artifact store cannot be written (a bucket that is down or hangs): its item
results go to the database, and the uploads of its files are given up, their rows FAILED. Every outcome
file (the ``*_ITEMS`` JSON Lines and the CSV export) is made of item results alone, so once the run has
ended and the store can be written again, the stored results write them again; the run log cannot be.

Every Service instance sweeps now and then. A run is repaired under its recovery lock (one repairer at a
time across instances, never beside a recovery of the same run) and looked at again under it, so a pass
repeats nothing another one did. A rebuilt file keeps the expiry of the one it replaces. Its row is
recorded only once the store holds its bytes, READY at once: an attempt the store refuses leaves nothing
behind (the FAILED row it would have replaced stays the record of the loss), and a repairer that dies
leaves no UPLOADING row that nobody would finish. The first file the store refuses ends the pass: the
store is still down, and the next pass tries again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.server.application.background import PassFailures, database_outage, repeat_every
from wepush.server.domain import (
    MAX_PAGE_LIMIT,
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    ItemState,
    Keyset,
    PageRequest,
    Run,
    UnitOfWorkFactory,
)

from ._artifacts import OUTCOME_TYPES, ArtifactKind, ResultArtifacts, RetentionPolicy, RunArtifactWriter
from ._fence import plain_transactions
from ._recipients import RecipientScope, read_recipients
from ._recovery_locks import InProcessRecoveryLocks, RecoveryLocks
from ._results import engine_result
from ._spec import recipient_record
from ._store import ArtifactStore, StoredObject

__all__ = ["OutcomeArtifactRepair", "RepairReport"]

_log = logging.getLogger("wepush.server.execution")

_FINAL = frozenset(
    {ItemState.SUCCEEDED, ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT, ItemState.SKIPPED}
)


@dataclass(frozen=True, slots=True)
class RepairReport:
    rebuilt: int = 0
    """Files written again, now READY."""
    dropped: int = 0
    """Lost files no stored result belongs in (now DELETED): there is nothing to write again."""
    held: int = 0
    """Runs left to another repairer (or recoverer) that holds them."""
    store_failed: bool = False
    """The store refused a file: the pass stopped there."""

    def __add__(self, other: RepairReport) -> RepairReport:
        return RepairReport(
            self.rebuilt + other.rebuilt,
            self.dropped + other.dropped,
            self.held + other.held,
            self.store_failed or other.store_failed,
        )


class _RebuildWriter(RunArtifactWriter):
    """Writes a run's files again: each row recorded READY once the store holds its bytes, with the expiry
    of the file it replaces; files the store refuses leave no row and are only counted."""

    def __init__(
        self,
        *,
        store: ArtifactStore,
        uow: UnitOfWorkFactory,
        run: Run,
        clock: Callable[[], datetime],
        expiry: Mapping[str, datetime | None],
    ) -> None:
        super().__init__(
            store=store,
            tx=plain_transactions(uow),
            workspace_id=run.workspace_id,
            run_id=run.id,
            clock=clock,
            retention=RetentionPolicy(),
        )
        self._uow = uow
        self._expiry = expiry
        self.refused: list[tuple[str, str]] = []
        """(artifact type, cause) of each file the store refused."""

    def _expires_at(self, kind: ArtifactKind, now: datetime) -> datetime:
        kept = self._expiry.get(kind.artifact_type)
        return kept if kept is not None else super()._expires_at(kind, now)

    async def _announce(self, row: Artifact) -> Artifact:
        return row  # recorded by ``_settle_ready``, once the bytes are stored

    async def _settle_ready(self, row: Artifact, stored: StoredObject) -> Artifact:
        ready = replace(
            row, state=ArtifactState.READY, size_bytes=stored.size_bytes, sha256=stored.sha256 or ""
        )
        try:
            async with self._uow() as uow:
                return await uow.artifacts.add(ready)
        except BaseException:
            # No row will ever name the object: remove it rather than leave it in the store for good.
            with contextlib.suppress(Exception):
                await self._store.delete(row.storage_key)
            raise

    async def _mark_failed(self, row: Artifact, cause: BaseException | str) -> None:
        self.refused.append((row.artifact_type, cause if isinstance(cause, str) else type(cause).__name__))


class OutcomeArtifactRepair:
    """Finds the outcome files finished runs lost and writes them again from the stored item results."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        store: ArtifactStore,
        clock: Callable[[], datetime],
        *,
        locks: RecoveryLocks | None = None,
        batch_size: int = 500,
    ) -> None:
        """``locks`` must span every instance sharing the database (the default spans only this process)."""
        self._uow = uow
        self._store = store
        self._clock = clock
        self._locks = locks or InProcessRecoveryLocks()
        self._batch = batch_size
        # The passes and each run's repair in them: a run that cannot be repaired is followed on its own.
        self._failures = PassFailures(_log, "artifact rebuild", event="ARTIFACT_REBUILD_FAILED")

    async def sweep(self) -> RepairReport:
        """One pass over every finished run with a lost outcome file; stops at the first file the store
        refuses, or at a database outage. A run that cannot be repaired for another reason is logged and
        left to the next pass."""
        report = RepairReport()
        seen: set[str] = set()
        after: Keyset | None = None
        while True:
            async with self._uow(read_only=True) as uow:
                page = await uow.artifacts.list_unreplaced_failures(
                    OUTCOME_TYPES, self._clock(), PageRequest(limit=100, after=after)
                )
            for lost in page.items:
                if lost.owner_id in seen:
                    continue
                seen.add(lost.owner_id)
                part, ids = f"run {lost.owner_id}", {"workspaceId": lost.workspace_id, "runId": lost.owner_id}
                try:
                    report += await self.repair_run(lost.workspace_id, lost.owner_id)
                except Exception as error:
                    if database_outage(error) is not None:
                        # Every other run's repair fails the same: the pass ends, and the outage is told
                        # once, by the loop (``run_every``).
                        raise
                    self._failures.failed(error, part, extra=ids)
                else:
                    self._failures.succeeded(part, extra=ids)
                if report.store_failed:
                    return report
            if page.next_after is None:
                return report
            after = page.next_after

    async def run_every(self, interval: timedelta) -> None:
        """Sweep now and then every ``interval`` until cancelled; a failed pass is retried next time."""
        await repeat_every(interval, self._pass, self._failures)

    async def _pass(self) -> None:
        report = await self.sweep()
        if report.rebuilt or report.dropped:
            _log.info("artifact rebuild: %s", report, extra={"event": "ARTIFACT_REBUILD_PASS"})

    async def repair_run(self, workspace_id: str, run_id: str) -> RepairReport:
        """Write the run's lost outcome files again, if it has ended and still lacks them."""
        async with self._locks.hold(run_id) as mine:
            if not mine:
                return RepairReport(held=1)
            # Looked at again under the lock: another repairer may have finished just before.
            async with self._uow(read_only=True) as uow:
                run = await uow.runs.get(workspace_id, run_id)
                found = await uow.artifacts.list_page(
                    workspace_id,
                    ArtifactOwnerType.RUN,
                    run_id,
                    PageRequest(limit=MAX_PAGE_LIMIT),
                    states=[ArtifactState.FAILED],
                    artifact_types=OUTCOME_TYPES,
                    without_replaced_failures=True,
                )
            now = self._clock()
            lost = [a for a in found.items if a.expires_at is None or a.expires_at > now]
            if not run.state.is_terminal or not lost:
                return RepairReport()
            return await self._rebuild(run, lost)

    async def _rebuild(self, run: Run, lost: list[Artifact]) -> RepairReport:
        expiry: dict[str, datetime | None] = {}
        for artifact in lost:
            kept = expiry.get(artifact.artifact_type, artifact.expires_at)
            later = artifact.expires_at
            expiry[artifact.artifact_type] = None if kept is None or later is None else max(kept, later)
        writer = _RebuildWriter(store=self._store, uow=self._uow, run=run, clock=self._clock, expiry=expiry)
        files = ResultArtifacts(writer, only=expiry.keys())
        ids = {"workspaceId": run.workspace_id, "runId": run.id}
        written: set[str] = set()
        try:
            async for result in _stored_outcomes(self._uow, RecipientScope.of_run(run), self._batch):
                await files.write(result)
            written = {ref.kind for ref in await files.close()}
        except Exception:
            await files.abandon()
            if not writer.refused:
                raise
        if written:
            _log.info(
                "run %s: %s written again from its stored item results",
                run.id,
                ", ".join(sorted(written)),
                extra={"event": "ARTIFACT_REBUILT", **ids},
            )
        if writer.refused:
            kind, cause = writer.refused[0]
            _log.warning(
                "run %s: its lost %s could not be written again (%s); the next pass retries",
                run.id,
                kind,
                cause,
                extra={"event": "ARTIFACT_REBUILD_FAILED", **ids},
            )
            return RepairReport(rebuilt=len(written), store_failed=True)
        dropped = await self._drop([a for a in lost if a.artifact_type not in written])
        return RepairReport(rebuilt=len(written), dropped=dropped)

    async def _drop(self, nothing_to_write: Collection[Artifact]) -> int:
        """Lost files no stored result belongs in (those outcomes were settled otherwise since): no file
        can stand for them, so they become history instead of being looked for on every pass."""
        for artifact in nothing_to_write:
            async with self._uow() as uow:
                await uow.artifacts.update(replace(artifact, state=ArtifactState.DELETED))
        return len(nothing_to_write)


async def _stored_outcomes(
    uow: UnitOfWorkFactory, scope: RecipientScope, batch_size: int
) -> AsyncIterator[EngineItemResult]:
    """Every recipient's stored final outcome in sequence order, with its recipient fields, as an artifact
    line (the same walk as settling a run, reading only)."""
    after: int | None = None
    while True:
        async with uow(read_only=True) as unit:
            page = await read_recipients(unit, scope, after, batch_size)
            if not page.items:
                return
            last = page.items[-1].sequence
            # At most one item per recipient lies in (after, last], so a page of the same size holds them.
            stored = await unit.run_items.list_page(
                scope.run_id, PageRequest(limit=len(page.items), after=after)
            )
        known = {i.sequence: i for i in stored.items if i.sequence <= last and i.state in _FINAL}
        for recipient in page.items:
            item = known.get(recipient.sequence)
            if item is not None:
                yield engine_result(item, recipient_record(scope.run_id, recipient).fields)
        after = last
