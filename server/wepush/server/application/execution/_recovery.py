"""Recovery of runs whose executor died: LOST → RECOVERING → a truthful end.

The dead executor's lease is revoked first, so anything it still tries to write is rejected with
``LEASE_EXPIRED``. A run that never dispatched anything goes back to PENDING and is simply executed again,
unless it was being cancelled. Otherwise nothing is re-sent automatically: items without a recorded result
become UNKNOWN when they lie at or below the dispatch high-water mark (they may have been sent) and UNSENT
above it; the result artifacts and the run log are rebuilt from the database; and the run ends FAILED or
PARTIAL with the counts written in the same transaction as the terminal state — CANCELLED, its command
APPLIED, when it was being cancelled or a cancel accepted for it was never applied by the dead executor.
Resending UNKNOWN or UNSENT items is the operator's decision.

The same settling ends a run cancelled while PENDING (CANCELLING, never started, no executor to wait
for): every recipient UNSENT in batches of short transactions, its files, then CANCELLED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from wepush.server.application.background import PassFailures
from wepush.server.domain import (
    AgentLease,
    Keyset,
    PageRequest,
    Run,
    RunCommand,
    RunCommandType,
    RunCounts,
    RunEventDraft,
    RunState,
    RunStateConflict,
    UnitOfWorkFactory,
    VersionConflict,
)

from ._artifacts import ResultArtifacts, RetentionPolicy, RunArtifactWriter, RunLog, log_line
from ._commands import pending_commands, reject_pending
from ._fence import plain_transactions, retrying
from ._notifier import RunAvailabilityNotifier
from ._outcomes import counts_json
from ._recipients import RecipientScope
from ._recovery_locks import InProcessRecoveryLocks, RecoveryLocks
from ._settle import SETTLED_CODE, SettleCause, settle_items, supersede_artifacts
from ._store import ArtifactStore

__all__ = ["EXECUTING_STATES", "RecoveryOutcome", "RunRecovery"]

EXECUTING_STATES = frozenset({RunState.LEASED, RunState.RUNNING, RunState.PAUSED, RunState.CANCELLING})

_log = logging.getLogger("wepush.server.execution")

CANCELLED_BEFORE_START = "cancelled before any agent started it"


@dataclass(frozen=True, slots=True)
class _Ending:
    """How the Service ends a run no executor will end: after its executor was lost, or a cancel that
    came before any agent started it."""

    cause: str
    items: SettleCause
    """What each recipient given an outcome here carries."""
    stop_reason: str
    recovered: bool
    log_event: str
    reason: str | None = None
    """The run's final reason; ``None`` for the counts summary of a recovery."""

    @classmethod
    def recovery(cls, cause: str) -> _Ending:
        items = SettleCause.executor_lost(f"{cause}: the outcome was not recorded")
        return cls(cause, items, SETTLED_CODE, recovered=True, log_event="RUN_RECOVERED")

    @classmethod
    def cancel_before_start(cls, run: Run) -> _Ending:
        # Like the engine's own UNSENT after a cancel: no provider code, nothing was attempted.
        return cls(
            CANCELLED_BEFORE_START,
            SettleCause(None, None),
            "CANCELLED",
            recovered=False,
            log_event="RUN_CANCELLED",
            reason=run.state_reason or CANCELLED_BEFORE_START,
        )


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    run_id: str
    final_state: RunState
    counts: RunCounts
    unknown_added: int
    unsent_added: int


class RunRecovery:
    """Settles runs no executor will end: left behind by a dead one, or cancelled before any started. Safe
    to call again for the same run: every step is a conditional transition, and a step another instance
    already took ends the call."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        artifact_store: ArtifactStore,
        clock: Callable[[], datetime],
        retention: RetentionPolicy | None = None,
        notifier: RunAvailabilityNotifier | None = None,
        batch_size: int = 500,
        max_attempts: int = 3,
        locks: RecoveryLocks | None = None,
    ) -> None:
        self._uow = uow
        self._locks = locks or InProcessRecoveryLocks()
        self._tx = plain_transactions(uow)
        self._store = artifact_store
        self._clock = clock
        self._retention = retention or RetentionPolicy()
        self._notifier = notifier
        self._batch_size = batch_size
        self._max_attempts = max_attempts

    async def recover_lease(self, lease: AgentLease, cause: str) -> RecoveryOutcome | None:
        """Revoke ``lease`` (if still active) so its holder can no longer write, then recover its run;
        ``None`` when the run needs nothing (terminal, pending, or held under another lease)."""
        async with self._uow() as uow:
            await uow.leases.revoke(lease.id)
        return await self.recover_orphan(lease.workspace_id, lease.run_id, cause, lease=lease)

    async def recover_orphan(
        self, workspace_id: str, run_id: str, cause: str, *, lease: AgentLease | None = None
    ) -> RecoveryOutcome | None:
        """Recover a run in an executing state that no ACTIVE lease covers any more (its lease expired or
        was revoked); ``None`` when the run is covered or not executing."""
        try:
            run, previous = await self._mark_lost(workspace_id, run_id, cause, lease)
        except (RunStateConflict, VersionConflict):
            return None  # the run moved on meanwhile (finished, or another instance recovers it)
        if run is None:
            return None
        if run.cancelled_before_start:
            return await self.finish_cancelled(run)  # no executor ever held it: nothing was lost
        _log.warning(
            "run %s was lost (%s); recovering",
            run.id,
            cause,
            extra={"event": "RUN_LOST", "workspaceId": run.workspace_id, "runId": run.id},
        )
        # A run whose executor keeps dying before it dispatches anything is not queued forever.
        requeue = lease is None or lease.epoch < self._max_attempts
        return await self.recover_run(run, cause, previous=previous, requeue=requeue)

    async def _mark_lost(
        self, workspace_id: str, run_id: str, cause: str, lease: AgentLease | None
    ) -> tuple[Run | None, RunState]:
        # Most runs a periodic scan looks at are healthy: find that out without taking the write lock.
        async with self._uow(read_only=True) as uow:
            if await uow.leases.find_active(run_id) is not None:
                return None, RunState.RUNNING
        async with self._uow() as uow:
            active = await uow.leases.find_active(run_id)
            run = await uow.runs.get(workspace_id, run_id)
            previous = run.state
            if active is not None or run.state not in (*EXECUTING_STATES, RunState.LOST):
                return None, previous
            if run.cancelled_before_start:
                return run, previous
            if run.state is not RunState.LOST:
                run = await uow.runs.transition(
                    run.workspace_id, run.id, expected_version=run.version, target=RunState.LOST, reason=cause
                )
                data: dict[str, object] = {"previousState": previous.value, "cause": cause}
                if lease is not None:
                    data |= {"leaseId": lease.id, "epoch": lease.epoch, "agentId": lease.agent_id}
                await uow.run_events.append(
                    run.workspace_id,
                    run.id,
                    [RunEventDraft(type="RUN_LOST", occurred_at=self._clock(), data=data)],
                )
        return run, previous

    async def finish_cancelled(self, run: Run) -> RecoveryOutcome | None:
        """End a run cancelled before any agent started it (``Run.cancelled_before_start``): every
        recipient UNSENT in batches, the UNSENT file and the run log, then CANCELLED with its counts.
        ``None`` when the run is no such run (any more) or another instance is ending it."""
        async with self._locks.hold(run.id) as mine:
            if not mine:
                return None
            async with self._uow(read_only=True) as uow:
                current = await uow.runs.get(run.workspace_id, run.id)
            if not current.cancelled_before_start:
                return None
            # What an interrupted earlier pass left is replaced; its recorded items keep their outcome.
            await self._supersede_artifacts(current)
            return await self._settle(
                current, _Ending.cancel_before_start(current), RunState.CANCELLING, 0, None
            )

    async def finish_cancelled_runs(self) -> int:
        """One pass over the runs cancelled before any agent started them; how many this pass ended."""
        ended = 0
        after: Keyset | None = None
        while True:
            async with self._uow(read_only=True) as uow:
                page = await uow.runs.scan([RunState.CANCELLING], PageRequest(limit=100, after=after))
            for run in page.items:
                if run.cancelled_before_start and await self.finish_cancelled(run) is not None:
                    ended += 1
            if page.next_after is None:
                return ended
            after = page.next_after

    async def finish_cancelled_every(self, interval: timedelta, notifier: RunAvailabilityNotifier) -> None:
        """The Service's own loop (every instance, with or without an embedded agent): a pass whenever
        ``notifier`` hints (a cancel was stored) and at least every ``interval``; a failed pass is retried."""
        failures = PassFailures(_log, "ending cancelled runs", event="RUN_CANCEL_FINISH_FAILED")
        with notifier.listening() as hint:
            while True:
                with failures.attempt():
                    await self.finish_cancelled_runs()
                await hint.wait(interval.total_seconds())

    async def recover_run(
        self, run: Run, cause: str, *, previous: RunState | None = None, requeue: bool = True
    ) -> RecoveryOutcome | None:
        """Continue from LOST or RECOVERING (e.g. a recovery interrupted by another restart); ``None``
        when another recoverer holds the run or the run needs nothing any more."""
        async with self._locks.hold(run.id) as mine:
            if not mine:
                _log.info(
                    "run %s is being recovered elsewhere; left to that recoverer",
                    run.id,
                    extra={"event": "RUN_RECOVERY_HELD", "workspaceId": run.workspace_id, "runId": run.id},
                )
                return None
            # Read again under the lock: the recoverer that held it may have ended the run meanwhile.
            async with self._uow(read_only=True) as uow:
                current = await uow.runs.get(run.workspace_id, run.id)
            return await self._recover_held(current, cause, previous=previous, requeue=requeue)

    async def _recover_held(
        self, run: Run, cause: str, *, previous: RunState | None, requeue: bool
    ) -> RecoveryOutcome | None:
        if run.state is RunState.LOST:
            try:
                async with self._uow() as uow:
                    run = await uow.runs.transition(
                        run.workspace_id,
                        run.id,
                        expected_version=run.version,
                        target=RunState.RECOVERING,
                        reason=cause,
                    )
                    await uow.run_events.append(
                        run.workspace_id,
                        run.id,
                        [
                            RunEventDraft(
                                type="RUN_RECOVERING", occurred_at=self._clock(), data={"cause": cause}
                            )
                        ],
                    )
            except (RunStateConflict, VersionConflict):
                return None  # another instance took the run over first
        if run.state is not RunState.RECOVERING:
            return None
        async with self._uow(read_only=True) as uow:
            mark = await uow.runs.dispatch_mark(run.workspace_id, run.id)
            recorded = sum((await uow.run_items.count_by_state(run.id)).values())
        await self._supersede_artifacts(run)
        cancel = await self._pending_cancel(run)
        cancelling = previous is RunState.CANCELLING or cancel is not None
        if mark == 0 and recorded == 0 and requeue and not cancelling:
            return await self._requeue(run, cause)
        return await self._settle(run, _Ending.recovery(cause), previous, mark, cancel)

    async def _pending_cancel(self, run: Run) -> RunCommand | None:
        """A cancel accepted for the run that its executor never applied (for example one sent while the
        run was LEASED): recovery carries it out, so the run ends CANCELLED and is never queued again."""
        async with self._uow(read_only=True) as uow:
            commands = await pending_commands(uow, run.id)
        return next((c for c in commands if c.type is RunCommandType.CANCEL), None)

    async def _requeue(self, run: Run, cause: str) -> RecoveryOutcome:
        """Nothing reached the engine, so nothing can have been sent: run it again."""
        reason = f"{cause}; nothing had been dispatched, queued again"
        async with self._uow() as uow:
            current = await uow.runs.get(run.workspace_id, run.id)
            await uow.runs.transition(
                run.workspace_id,
                run.id,
                expected_version=current.version,
                target=RunState.PENDING,
                reason=reason,
            )
        if self._notifier is not None:
            self._notifier.notify()
        return RecoveryOutcome(run.id, RunState.PENDING, RunCounts(total=run.recipient_count), 0, 0)

    async def _settle(
        self, run: Run, ending: _Ending, previous: RunState | None, mark: int, cancel: RunCommand | None
    ) -> RecoveryOutcome:
        writer = RunArtifactWriter(
            store=self._store,
            tx=self._tx,
            workspace_id=run.workspace_id,
            run_id=run.id,
            clock=self._clock,
            retention=self._retention,
        )
        artifacts = ResultArtifacts(writer)
        log = RunLog(writer)
        try:
            settled = await settle_items(
                tx=self._tx,
                scope=RecipientScope.of_run(run),
                dispatched_through=mark,
                artifacts=artifacts,
                cause=ending.items,
                clock=self._clock,
                batch_size=self._batch_size,
            )
            await artifacts.close()
            await self._write_log(run, log, ending, settled.counts)
        except BaseException:
            # Interrupted (database gone, shutdown): close the files here; the next pass marks their rows
            # FAILED and writes them again, and the items recorded so far keep their outcome.
            await artifacts.abandon()
            await log.abandon()
            raise
        counts = replace(settled.counts, retried=run.counts.retried)
        if previous is RunState.CANCELLING or cancel is not None:
            final = RunState.CANCELLED
        elif counts.succeeded + counts.skipped == counts.total:
            final = RunState.SUCCEEDED
        else:
            final = RunState.PARTIAL if counts.succeeded else RunState.FAILED
        reason = ending.reason or (
            f"{ending.cause}: {counts.unknown} item(s) UNKNOWN (may have been sent), {counts.unsent} UNSENT; "
            "nothing was sent again, resend them explicitly if needed"
        )
        if cancel is not None:
            given = cancel.payload.get("reason")
            reason = given if isinstance(given, str) and given else f"cancelled by command; {reason}"
        completed = self._completed(final, counts, ending, settled.unknown_added, settled.unsent_added)

        async def terminal() -> None:
            async with self._uow() as uow:
                current = await uow.runs.get(run.workspace_id, run.id)
                await uow.runs.record_progress(run.workspace_id, run.id, counts=counts, current_concurrency=0)
                await uow.runs.transition(
                    run.workspace_id, run.id, expected_version=current.version, target=final, reason=reason
                )
                events = [completed]
                if cancel is not None:
                    await uow.run_commands.record_ack(
                        cancel.command_id, applied=True, result_message="cancelled"
                    )
                    events.insert(0, self._cancel_acknowledged(cancel))
                await uow.run_events.append(run.workspace_id, run.id, events)
                await reject_pending(uow, run.id, f"RUN_STATE_CONFLICT: run is {final.value}")

        await retrying(terminal)
        ids = {"workspaceId": run.workspace_id, "runId": run.id}
        if ending.recovered:
            _log.warning(
                "run %s recovered as %s (%s)",
                run.id,
                final.value,
                reason,
                extra={"event": "RUN_RECOVERED", **ids},
            )
        else:
            _log.info(
                "run %s cancelled before start: %d recipient(s) UNSENT",
                run.id,
                counts.unsent,
                extra={"event": "RUN_CANCELLED", **ids},
            )
        return RecoveryOutcome(run.id, final, counts, settled.unknown_added, settled.unsent_added)

    def _cancel_acknowledged(self, cancel: RunCommand) -> RunEventDraft:
        return RunEventDraft(
            type="COMMAND_ACKNOWLEDGED",
            occurred_at=self._clock(),
            data={
                "commandId": cancel.command_id,
                "command": "CancelRun",
                "accepted": True,
                "code": "ACCEPTED",
            },
        )

    def _completed(
        self, final: RunState, counts: RunCounts, ending: _Ending, unknown_added: int, unsent_added: int
    ) -> RunEventDraft:
        return RunEventDraft(
            type="RUN_COMPLETED",
            occurred_at=self._clock(),
            data={
                "finalState": final.value,
                "counts": counts_json(counts),
                "stopReason": ending.stop_reason,
                "recovered": ending.recovered,
                "cause": ending.cause,
                "unknownAdded": unknown_added,
                "unsentAdded": unsent_added,
            },
        )

    async def _supersede_artifacts(self, run: Run) -> None:
        """Artifacts the dead executor left are replaced: unfinished ones fail, finished ones are deleted."""
        await supersede_artifacts(self._uow, self._tx, self._store, run.workspace_id, run.id)

    async def _write_log(self, run: Run, log: RunLog, ending: _Ending, counts: RunCounts) -> None:
        await log.replay(self._uow, run.id)
        await log.append(
            log_line(
                self._clock(),
                ending.log_event,
                {"cause": ending.cause, "unknown": counts.unknown, "unsent": counts.unsent},
                run_id=run.id,
                level="WARN" if ending.recovered else "INFO",
            )
        )
        await log.finish()
