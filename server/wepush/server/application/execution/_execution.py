"""``RunExecution``: one claimed run, from the fenced LEASED → RUNNING step to the terminal transaction.

Everything the execution writes carries its lease fence; if the lease is taken away (expired, revoked
by a recovery) every further write fails with ``LEASE_EXPIRED``, the engine is told to stop sending and
the execution ends without touching the run again.

A database outage does not end the run while the lease may still be ours: every write waits for the
database until the lease's expiry (``LeaseGuard.retrying``), the engine stops dispatching meanwhile
(nothing can be put on record), and the run carries on once the database is back. An outage that outlasts
the lease counts as losing it. The run ends with the counts its item rows hold, after settling any
recipient without one (``_outcomes``); if that cannot be stored the run is left to the recovery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from wepush.agent.engine import (
    CancelRun,
    EngineValidationError,
    ExecutionClock,
    ExecutionEngine,
    ExecutionPorts,
    RunEventType,
    RunHandle,
    RunSummary,
    SecretMasker,
    SystemClock,
    redact_diagnostic,
)
from wepush.agent.engine import RunEvent as EngineRunEvent
from wepush.server.domain import (
    AgentLease,
    ClaimedLease,
    DomainError,
    LeaseExpired,
    Run,
    RunCommand,
    RunCounts,
    RunEventDraft,
    RunState,
    UnitOfWorkFactory,
)
from wepush.server.domain.secrets import SecretScrubber, SecretStore

from ._artifacts import RUN_LOG, ResultArtifacts, RetentionPolicy, RunArtifactWriter, RunLog, log_line
from ._commands import ack_message, engine_command, pending_commands
from ._events import FencedRunEventSink, draft_of, move_run, path_to
from ._fence import LeaseGuard, retrying
from ._ledger import ExecutionLedger, UnitOfWorkLedger
from ._metrics import ExecutionMetrics, RunMeter
from ._outcomes import counts_json, final_reason, final_state, recorded_counts
from ._recipients import RecipientScope, SnapshotRecipientSource
from ._results import FencedResultSink
from ._secrets import RegisteredSecrets, StoredSecretResolver
from ._settle import SettleCause, settle_items, supersede_artifacts
from ._snapshot import RunSnapshot
from ._spec import execution_spec
from ._store import ArtifactStore

__all__ = ["ExecutionContext", "RunExecution"]

_log = logging.getLogger("wepush.server.execution")


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """What every execution shares; built once by the embedded agent."""

    uow: UnitOfWorkFactory
    engine: ExecutionEngine
    artifact_store: ArtifactStore
    secret_store: SecretStore
    clock: Callable[[], datetime]
    lease_ttl: timedelta = timedelta(seconds=30)
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    engine_clock: ExecutionClock = field(default_factory=SystemClock)
    settle_batch_size: int = 500
    ledger: ExecutionLedger | None = None
    """The hot statements' adapter; ``None`` spells them with units of work (``UnitOfWorkLedger``)."""
    redactor: SecretScrubber = field(default_factory=SecretMasker)
    """The Service's redactor: the run log goes through it and the run's secrets are registered with it.
    The default applies the shared rules only; the composition root passes the logging one."""
    metrics: ExecutionMetrics | None = None


class RunExecution:
    """Owns one run while this agent holds its lease. ``execute`` is the task body; ``deliver`` (commands),
    ``renew`` (lease) and ``stop`` (shutdown) are called by the agent's other loops."""

    def __init__(self, context: ExecutionContext, claimed: ClaimedLease, run: Run) -> None:
        self._ctx = context
        self.run = run
        self.lease = claimed.lease
        self._guard = LeaseGuard(
            context.uow, claimed.fence, context.clock, expires_at=claimed.lease.expires_at
        )
        self._ledger = context.ledger if context.ledger is not None else UnitOfWorkLedger(context.uow)
        self._handle: RunHandle | None = None
        self._handled: set[str] = set()
        # The engine's answer to each command, kept until it is stored: the terminal transaction may
        # commit before a delivery's own acknowledgement does, and must then store that answer itself.
        self._answers: dict[str, tuple[bool, str | None]] = {}
        self._cancel_reason: str | None = None
        self.lost = False
        self.final_state: RunState | None = None
        # Set once the terminal transaction starts: from then on a fence that no longer holds may be
        # this execution's own release, committed but not yet returned (``final_state`` is set after).
        self._finishing = False
        self._owned: list[ResultArtifacts | RunLog] = []
        self._secrets: RegisteredSecrets | None = None
        metrics = context.metrics
        # A dry run sends nothing: counting its items as succeeded would inflate what was delivered.
        self._meter: RunMeter | None = (
            None if metrics is None or run.dry_run else metrics.meter(run.provider_id)
        )

    @property
    def run_id(self) -> str:
        return self.run.id

    @property
    def handle(self) -> RunHandle | None:
        return self._handle

    # ------------------------------------------------------------------ the task body

    async def execute(self) -> None:
        try:
            await self._execute()
        except LeaseExpired:
            self.lost = True
            _log.warning(
                "run %s: lease %s was lost; the execution stops",
                self.run_id,
                self.lease.id,
                extra={"event": "LEASE_LOST"},
            )
        finally:
            if self.lost and self._handle is not None:
                self._handle_stop("the lease was lost")
            try:
                # Files not finished by now never will be (lease lost, hard shutdown): close them locally
                # and leave their rows to the recovery, which marks them FAILED.
                for owned in self._owned:
                    await owned.abandon()
            finally:
                if self._meter is not None:
                    # However the execution ended, none of its calls is in flight here any more.
                    self._meter.finished(None)
                # Last: until the run has fully ended something may still log a value it resolved.
                if self._secrets is not None:
                    self._secrets.release()

    async def _execute(self) -> None:
        await self._guard.retrying(self._begin)
        writer = self._writer()
        log = RunLog(writer, redactor=self._ctx.redactor)
        self._owned.append(log)
        try:
            snapshot = RunSnapshot.from_json(self.run.snapshot)
            spec = execution_spec(snapshot, self.run.created_at)
        except DomainError as exc:
            await self._fail_before_start(RecipientScope.of_run(self.run), log, "SNAPSHOT_INVALID", str(exc))
            return
        artifacts = ResultArtifacts(writer)
        self._owned.append(artifacts)
        events = FencedRunEventSink(
            self._guard,
            workspace_id=self.run.workspace_id,
            run_id=self.run_id,
            log=log,
            clock=self._ctx.clock,
            planned_total=snapshot.audience.recipient_count,
            meter=self._meter,
        )
        ledger = self._ledger
        stored = StoredSecretResolver(
            self._ctx.uow,
            self._ctx.secret_store,
            workspace_id=snapshot.workspace_id,
            account_id=snapshot.account.id,
            secret_versions=snapshot.account.secret_versions,
            retry=self._guard.retrying,
        )
        self._secrets = RegisteredSecrets(stored, self._ctx.redactor)
        recipients = SnapshotRecipientSource(
            self._ctx.uow, self._guard, snapshot, ledger, monotonic=self._ctx.engine_clock.monotonic
        )
        results = FencedResultSink(self._guard, ledger, self.run.workspace_id, self.run_id)
        ports = ExecutionPorts(
            recipient_source=recipients,
            secret_resolver=self._secrets,
            result_sink=results,
            artifact_sink=artifacts,
            event_sink=events,
            clock=self._ctx.engine_clock,
            # Item diagnostics and response bodies become results, events and artifacts: mask the
            # values this run resolved in them too, not only the shapes the rules know.
            redactor=self._ctx.redactor,
            observer=None if self._meter is None else self._meter.observer,
            # The run's dispatch mark: raised as records start, so a recovery after a crash takes only
            # what may really have been sent for UNKNOWN.
            dispatch_fence=recipients,
        )
        try:
            self._handle = await self._ctx.engine.start(spec, ports)
        except EngineValidationError as exc:
            await artifacts.discard()
            await self._fail_before_start(RecipientScope.of(snapshot), log, exc.category.value, exc.message)
            return
        except Exception as exc:
            # Not a refusal the engine names, but still nothing was dispatched: fail the run, never requeue
            # it into the same crash.
            _log.exception(
                "run %s: the engine could not start it", self.run_id, extra={"event": "RUN_START_FAILED"}
            )
            await artifacts.discard()
            detail = redact_diagnostic(f"{type(exc).__name__}: {exc}", limit=300) or type(exc).__name__
            await self._fail_before_start(RecipientScope.of(snapshot), log, "INTERNAL_ERROR", detail)
            return
        summary = await self._handle.completion()
        if self.lost:
            return
        if self._cancel_reason is None:
            # No command or shutdown cancelled the run, yet the engine may have (an outlasted pause):
            # the run ends with the reason the engine gave, not one of an operator's.
            self._cancel_reason = events.cancel_reason
        await self._finish(summary, events.final_events, log, results, RecipientScope.of(snapshot))

    async def _begin(self) -> None:
        """LEASED → RUNNING, after the fence is proven by acknowledging the lease in the same transaction."""
        async with self._guard.unchecked() as uow:
            await uow.leases.acknowledge(self._guard.fence, self._ctx.clock())
            run = await uow.runs.get(self.run.workspace_id, self.run_id)
            if run.state is RunState.LEASED:
                run = await uow.runs.transition(
                    run.workspace_id, run.id, expected_version=run.version, target=RunState.RUNNING
                )
        self.run = run

    def _writer(self) -> RunArtifactWriter:
        return RunArtifactWriter(
            store=self._ctx.artifact_store,
            tx=self._guard.transaction,
            workspace_id=self.run.workspace_id,
            run_id=self.run_id,
            clock=self._ctx.clock,
            retention=self._ctx.retention,
        )

    # ------------------------------------------------------------------ terminal transactions

    async def _finish(
        self,
        summary: RunSummary,
        final_events: list[EngineRunEvent],
        log: RunLog,
        results: FencedResultSink,
        scope: RecipientScope,
    ) -> None:
        for error in summary.suppressed_errors:
            await log.append(
                log_line(
                    summary.ended_at,
                    "SUPPRESSED_ERROR",
                    {"stage": error.stage, "code": error.code, "message": error.message},
                    run_id=self.run_id,
                    level="ERROR",
                )
            )
        completed = next((e for e in final_events if e.type is RunEventType.RUN_COMPLETED), None)
        stop = None if completed is None else completed.data.get("stopReason")
        recipients = self.run.recipient_count
        recorded = await self._guard.retrying(lambda: recorded_counts(self._ctx.uow, self.run_id, recipients))
        if recorded is None:
            recorded = await self._settle_unrecorded(results, scope, stop, log)
        counts = replace(recorded, retried=summary.retried)
        final = final_state(RunState(summary.final_state.value), counts)
        reason = final_reason(counts, final, self._cancel_reason, stop, summary.suppressed_errors)
        await log.finish()
        fallback = {"finalState": final.value, "counts": counts_json(counts), "stopReason": stop}
        await self._guard.retrying(lambda: self._terminal(final, reason, counts, final_events, fallback))

    async def _settle_unrecorded(
        self, results: FencedResultSink, scope: RecipientScope, stop: str | None, log: RunLog
    ) -> RunCounts:
        """Give every recipient without a recorded outcome one, as a recovery would: first the outcomes
        the engine could not record, then UNKNOWN up to the dispatch mark and UNSENT beyond it. The result
        files are written anew from the rows. Fails (``LeaseExpired`` once the lease's expiry has passed)
        rather than ever end the run with counts the rows do not back; the recovery settles it then."""
        guard, ledger, uow = self._guard, self._ledger, self._ctx.uow
        workspace_id, run_id = self.run.workspace_id, self.run_id
        held = list(results.unrecorded.values())
        if held:
            try:
                await guard.retrying(
                    lambda: ledger.record_results(guard.fence, guard.now(), workspace_id, run_id, held)
                )
            except LeaseExpired:
                raise
            except Exception:
                # The same batch failed the engine's appends already: settled as not recorded instead.
                _log.warning(
                    "run %s: %d outcome(s) the engine could not record cannot be stored; they are settled "
                    "as not recorded",
                    run_id,
                    len(held),
                    exc_info=True,
                    extra={"event": "RUN_OUTCOMES_UNSTORABLE"},
                )

        async def read_mark() -> int:
            async with uow(read_only=True) as unit:
                return await unit.runs.dispatch_mark(workspace_id, run_id)

        mark = await guard.retrying(read_mark)
        await guard.retrying(
            lambda: supersede_artifacts(
                uow,
                guard.transaction,
                self._ctx.artifact_store,
                workspace_id,
                run_id,
                keep={RUN_LOG.artifact_type},
            )
        )
        artifacts = ResultArtifacts(self._writer())
        self._owned.append(artifacts)
        settled = await settle_items(
            tx=guard.transaction,
            scope=scope,
            dispatched_through=mark,
            artifacts=artifacts,
            cause=SettleCause.unrecorded(stop),
            clock=self._ctx.clock,
            batch_size=self._ctx.settle_batch_size,
            retry=guard.retrying,
        )
        await artifacts.close()
        await log.append(
            log_line(
                self._ctx.clock(),
                "OUTCOMES_SETTLED",
                {"unknown": settled.unknown_added, "unsent": settled.unsent_added, "stopReason": stop},
                run_id=run_id,
                level="WARN",
            )
        )
        _log.warning(
            "run %s: the engine stopped (%s) with recipients whose outcome was not recorded: %d settled "
            "UNKNOWN (may have been sent), %d UNSENT",
            run_id,
            stop,
            settled.unknown_added,
            settled.unsent_added,
            extra={"event": "RUN_OUTCOMES_SETTLED"},
        )
        return settled.counts

    async def _terminal(
        self,
        final: RunState,
        reason: str | None,
        counts: RunCounts,
        final_events: list[EngineRunEvent],
        fallback_data: dict[str, Any],
    ) -> None:
        """One transaction: the RUN_COMPLETED event, the final counts, the terminal state, the lease release."""
        self._finishing = True
        now = self._ctx.clock()
        async with self._guard.unchecked() as uow:
            current = await uow.runs.get(self.run.workspace_id, self.run_id)
            if path_to(current.state, final) is None:
                # An operator's cancel wins over whatever else stopped the run: CANCELLING only ends CANCELLED.
                final, reason = RunState.CANCELLED, self._cancel_reason or reason
            drafts = [_completed_as(draft_of(e), final, counts) for e in final_events]
            stored = False
            if drafts:
                ack = await uow.leases.accept_event_batch(
                    self._guard.fence, now, first_sequence=final_events[0].sequence, events=drafts
                )
                stored = not ack.gap
            else:
                await uow.leases.check(self._guard.fence, now)
            if not stored:
                # The engine could not publish its last events; the Service states the outcome itself.
                await uow.run_events.append(
                    self.run.workspace_id,
                    self.run_id,
                    [
                        RunEventDraft(
                            type="RUN_COMPLETED",
                            occurred_at=now,
                            data={**fallback_data, "finalState": final.value},
                        )
                    ],
                )
            await uow.runs.record_progress(
                self.run.workspace_id, self.run_id, counts=counts, current_concurrency=0
            )
            await move_run(uow, self.run.workspace_id, self.run_id, final, reason)
            await uow.leases.release(self._guard.fence, now)
            for command in await pending_commands(uow, self.run_id):
                applied, message = self._answers.get(
                    command.command_id, (False, f"RUN_STATE_CONFLICT: run is {final.value}")
                )
                await uow.run_commands.record_ack(command.command_id, applied=applied, result_message=message)
        self.final_state = final
        if self._meter is not None:
            self._meter.finished(counts)
        _log.info("run %s: finished %s", self.run_id, final.value, extra={"event": "RUN_FINISHED"})

    async def _fail_before_start(self, scope: RecipientScope, log: RunLog, code: str, message: str) -> None:
        """The engine refused the run before dispatching anything: every recipient is UNSENT."""
        # The message becomes the run's reason, which the API returns: a provider that failed to open
        # may have quoted a secret the run resolved (still registered until the execution ends).
        message = self._ctx.redactor.text(message)
        await log.append(
            log_line(
                self._ctx.clock(),
                "RUN_REJECTED",
                {"code": code, "message": message},
                run_id=self.run_id,
                level="ERROR",
            )
        )
        artifacts = ResultArtifacts(self._writer())
        self._owned.append(artifacts)
        settled = await settle_items(
            tx=self._guard.transaction,
            scope=scope,
            dispatched_through=0,
            artifacts=artifacts,
            cause=SettleCause.refused(code),
            clock=self._ctx.clock,
            batch_size=self._ctx.settle_batch_size,
            retry=self._guard.retrying,
        )
        await artifacts.close()
        await log.finish()
        reason = f"{code}: {message}"
        data = {
            "finalState": RunState.FAILED.value,
            "counts": counts_json(settled.counts),
            "stopReason": code,
        }
        await self._guard.retrying(lambda: self._terminal(RunState.FAILED, reason, settled.counts, [], data))

    # ------------------------------------------------------------------ calls from the agent's loops

    async def deliver(self, command: RunCommand) -> bool:
        """Apply one stored command (idempotent by command id) and record the acknowledgement.

        Returns ``False`` when the run has not started yet; the poller offers the command again later.
        """
        if command.command_id in self._handled or self.final_state is not None:
            return True
        handle = self._handle
        if handle is None:
            return False
        message: str | None
        try:
            translated = engine_command(command)
        except ValueError as exc:
            applied, message = False, f"VALIDATION_FAILED: {exc}"
        else:
            if isinstance(translated, CancelRun) and self._cancel_reason is None:
                self._cancel_reason = translated.reason or "cancelled by command"
            result = await handle.submit(translated)
            applied, message = result.accepted, ack_message(result)
        self._answers[command.command_id] = (applied, message)

        async def acknowledge() -> None:
            async with self._guard.transaction() as uow:
                await uow.run_commands.record_ack(command.command_id, applied=applied, result_message=message)

        try:
            await retrying(acknowledge)
        except LeaseExpired:
            self._lease_lost()
            return True
        self._handled.add(command.command_id)
        return True

    async def renew(self) -> bool:
        """Extend the lease; ``False`` (and the engine told to stop) when the lease is no longer ours."""
        if self.lost:
            return False

        async def extend() -> AgentLease:
            # The instant of each try: one made after a wait must not claim the lease at an earlier one.
            now = self._ctx.clock()
            async with self._guard.unchecked() as uow:
                return await uow.leases.renew(self._guard.fence, now, expires_at=now + self._ctx.lease_ttl)

        try:
            # Through a database outage until the lease's expiry: renewed as soon as the database is back,
            # the lease (and every write waiting for the database) goes on.
            renewed = await self._guard.retrying(extend)
        except LeaseExpired:
            self._lease_lost()
            return False
        self._guard.extended(renewed.expires_at)
        return True

    def stop(self, reason: str) -> bool:
        """Ask the engine to cancel the run (shutdown); ``False`` if it has not started."""
        if self._handle is None:
            return False
        if self._cancel_reason is None:
            self._cancel_reason = reason
        self._handle_stop(reason)
        return True

    def _lease_lost(self) -> None:
        if self.final_state is not None or self._finishing:
            # Released by our own terminal transaction, not lost: a delivery or renewal running beside it
            # may see the release commit before ``final_state`` is set. The engine has completed, so there
            # is nothing to stop; if the terminal transaction itself finds the lease gone, ``execute``
            # reports the loss.
            return
        if not self.lost:
            self.lost = True
            _log.warning(
                "run %s: lease %s is no longer active; stopping the engine",
                self.run_id,
                self.lease.id,
                extra={"event": "LEASE_LOST"},
            )
        self._handle_stop("the lease was lost")

    def _handle_stop(self, reason: str) -> None:
        handle = self._handle
        if handle is None:
            return
        task = asyncio.get_running_loop().create_task(
            handle.submit(CancelRun(f"stop-{self.lease.id}", reason))
        )
        task.add_done_callback(_ignore_result)


def _ignore_result(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _completed_as(draft: RunEventDraft, final: RunState, counts: RunCounts) -> RunEventDraft:
    """The engine's RUN_COMPLETED with the run's final state and recorded counts."""
    if draft.type != RunEventType.RUN_COMPLETED.value:
        return draft
    engine_counts = draft.data.get("counts")
    merged = {**(engine_counts if isinstance(engine_counts, dict) else {}), **counts_json(counts)}
    return replace(draft, data={**draft.data, "finalState": final.value, "counts": merged})
