"""``EmbeddedAgent``: the standalone Service's in-process agent, with the same lease and state semantics as a
remote agent but no gRPC.

It is a supervisor with one task per loop:

* **claimer** — claims PENDING runs (one ACTIVE lease each, enforced by the database) while fewer than
  ``max_runs`` execute, woken by the availability hint or its scan interval;
* **command poller** — delivers stored operator commands to the runs it executes;
* **lease renewer** — extends the leases of its runs and reports the agent's heartbeat; through a database
  outage a renewal waits for the database until its lease's expiry, so a run outlives an outage shorter
  than the lease TTL (see ``RunExecution``);
* **lease reaper** — expires overdue leases and recovers runs no active lease covers any more.

Its name is its identity across restarts, so before it registers it makes sure no live process holds that
name (see :meth:`EmbeddedAgent.start`): recovering at start revokes every lease held under the name.

(Artifact retention is the Service's, not the agent's: every instance sweeps, with or without an agent.)

The loops run under ``asyncio.wait(FIRST_EXCEPTION)``: a loop that fails shuts the agent down (recorded in
:attr:`EmbeddedAgent.failure`). ``shutdown`` is idempotent and ordered: stop claiming, let running runs
finish within the grace period, then cancel them and wait for them to settle, then stop the other loops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

from wepush.agent.engine import (
    ExecutionClock,
    ExecutionEngine,
    SystemClock,
    format_instant,
)
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application.background import PassFailures, database_outage
from wepush.server.application.execution import (
    EXECUTING_STATES,
    ArtifactStore,
    ExecutionContext,
    ExecutionMetrics,
    HintListener,
    RecoveryLocks,
    RunAvailabilityNotifier,
    RunExecution,
    RunRecovery,
    pending_commands,
)
from wepush.server.domain import (
    Agent,
    AgentStatus,
    Keyset,
    PageRequest,
    RunEventDraft,
    RunState,
    UnitOfWorkFactory,
    utc_now,
)
from wepush.server.domain.secrets import SecretScrubber, SecretStore
from wepush.server.infra.db import SqliteExecutionLedger, execution_ledger
from wepush.server.infra.logging import LogContextBinding, bind_log_context, get_redactor

from ._registration import find_embedded_agent, register_agent
from ._settings import EXPIRED_CAUSE, RESTART_CAUSE, EmbeddedAgentSettings

__all__ = ["AgentNameInUse", "EmbeddedAgent"]

_log = logging.getLogger("wepush.server.execution")

# The renewer reports a heartbeat three times per lease TTL. A name whose heartbeat has missed three in a
# row (one lease TTL, when its leases would expire too) is held by no live process any more.
_HEARTBEATS_PER_LEASE = 3
_MISSED_HEARTBEATS = 3
# What a clean shutdown leaves (or a row that never reported): no process claims the name.
_RELEASED = frozenset({AgentStatus.STOPPED, AgentStatus.OFFLINE})


class AgentNameInUse(RuntimeError):
    """Another live process's embedded agent reports heartbeats under this agent's name."""


class EmbeddedAgent:
    """Owned by the composition root: ``await agent.start()`` once, ``await agent.shutdown()`` on exit."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        providers: ProviderCatalog,
        artifact_store: ArtifactStore,
        secret_store: SecretStore,
        notifier: RunAvailabilityNotifier,
        workspace_id: str,
        settings: EmbeddedAgentSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        engine_clock: ExecutionClock | None = None,
        agent_version: str = "0.0.0",
        redactor: SecretScrubber | None = None,
        recovery_locks: RecoveryLocks | None = None,
        metrics: ExecutionMetrics | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``recovery_locks`` must span every instance sharing the database (the default spans only this
        process, enough for standalone). ``redactor`` defaults to the process-wide logging one: the run log goes through it and each
        run registers the secret values it resolves with it, so log lines mask them too. ``sleep`` is how
        ``start`` waits for a predecessor's heartbeat to age (paired with ``clock`` in tests)."""
        self._settings = settings or EmbeddedAgentSettings()
        s = self._settings
        self._uow = uow
        self._catalog = providers
        self._notifier = notifier
        self._workspace_id = workspace_id
        self._clock = clock
        self._version = agent_version
        self._sleep = sleep
        self._heartbeat_interval = s.lease_ttl / _HEARTBEATS_PER_LEASE
        engine = ExecutionEngine(providers.get, replace(s.engine_options, capacity=s.max_concurrency))
        self._ledger = execution_ledger(uow)
        self._context = ExecutionContext(
            uow=uow,
            engine=engine,
            artifact_store=artifact_store,
            secret_store=secret_store,
            clock=clock,
            lease_ttl=s.lease_ttl,
            retention=s.retention,
            engine_clock=engine_clock or SystemClock(),
            settle_batch_size=s.settle_batch_size,
            ledger=self._ledger,
            redactor=redactor if redactor is not None else get_redactor(),
            metrics=metrics,
        )
        self._recovery = RunRecovery(
            uow=uow,
            artifact_store=artifact_store,
            clock=clock,
            retention=s.retention,
            notifier=notifier,
            batch_size=s.settle_batch_size,
            locks=recovery_locks,
        )
        self._agent: Agent | None = None
        self._name_free = False
        self._executions: dict[str, RunExecution] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._claimer: asyncio.Task[None] | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._claim_hint: HintListener | None = None
        self._command_hint: HintListener | None = None
        self.failure: BaseException | None = None
        # How each loop tells a failed pass: a database outage once, not a traceback per pass.
        self._claim_failures = PassFailures(_log, "run claimer", event="RUN_CLAIM_FAILED")
        self._heartbeat_failures = PassFailures(
            _log, "embedded agent heartbeat", event="AGENT_HEARTBEAT_FAILED"
        )
        self._delivery_failures = PassFailures(_log, "command delivery", event="COMMAND_DELIVERY_FAILED")
        self._renew_failures = PassFailures(_log, "lease renewal", event="LEASE_RENEW_FAILED")
        self._reaper_failures = PassFailures(_log, "lease reaper", event="LEASE_REAPER_FAILED")

    # ------------------------------------------------------------------ observation

    @property
    def agent_id(self) -> str:
        if self._agent is None:
            raise RuntimeError("the embedded agent has not started")
        return self._agent.id

    @property
    def active_runs(self) -> tuple[str, ...]:
        return tuple(self._executions)

    @property
    def stopped(self) -> bool:
        return self._shutdown_task is not None and self._shutdown_task.done()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Make sure no live process holds the name, register the agent, recover what a previous process
        left behind, then start the loops.

        Raises :class:`AgentNameInUse` (having logged why) when another process's agent still reports
        heartbeats under the name; nothing was registered or recovered then."""
        if self._agent is not None:
            raise RuntimeError("the embedded agent was already started")
        await self.ensure_name_free()
        self._agent = await self._register()
        await self._recover_at_start()
        self._claim_hint = self._notifier.listen()
        self._command_hint = self._notifier.listen()
        # Tasks copy the log context when they are created: every line the loops log names this agent.
        with bind_log_context(agent_id=self.agent_id):
            self._claimer = asyncio.create_task(self._claim_loop(), name="embedded-agent:claimer")
            self._loops = [
                self._claimer,
                asyncio.create_task(self._command_loop(), name="embedded-agent:command-poller"),
                asyncio.create_task(self._renew_loop(), name="embedded-agent:lease-renewer"),
                asyncio.create_task(self._reaper_loop(), name="embedded-agent:lease-reaper"),
            ]
            self._supervisor = asyncio.create_task(self._supervise(), name="embedded-agent:supervisor")

    async def _supervise(self) -> None:
        done, _ = await asyncio.wait(self._loops, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                self.failure = task.exception()
                _log.error(
                    "embedded agent loop %s failed; shutting down",
                    task.get_name(),
                    exc_info=self.failure,
                    extra={"event": "AGENT_LOOP_FAILED"},
                )
                self._begin_shutdown(None)
                return

    def _begin_shutdown(self, grace: timedelta | None) -> asyncio.Task[None]:
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.create_task(self._shutdown(grace), name="embedded-agent:shutdown")
        return self._shutdown_task

    async def shutdown(self, grace: timedelta | None = None) -> None:
        """Idempotent: stop claiming, settle the runs (cancel them after ``grace``), stop every loop."""
        if self._agent is None:
            return
        await asyncio.shield(self._begin_shutdown(grace))

    async def _shutdown(self, grace: timedelta | None) -> None:
        seconds = (grace or self._settings.shutdown_grace).total_seconds()
        await _cancel(self._claimer)
        await self._heartbeat(AgentStatus.DRAINING)
        if self._tasks and not await self._wait_runs(seconds):
            for execution in tuple(self._executions.values()):
                execution.stop("the Service is shutting down")
            if not await self._wait_runs(self._settings.cancel_settle_timeout.total_seconds()):
                # Their leases stay ACTIVE under this agent's name: the next start recovers these runs.
                for task in tuple(self._tasks.values()):
                    task.cancel()
                await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        for task in self._loops:
            await _cancel(task)
        if self._supervisor is not None and self._supervisor is not asyncio.current_task():
            await _cancel(self._supervisor)
        for hint in (self._claim_hint, self._command_hint):
            if hint is not None:
                hint.close()
        await self._heartbeat(AgentStatus.STOPPED)
        if isinstance(self._ledger, SqliteExecutionLedger):
            self._ledger.close()

    async def _wait_runs(self, seconds: float) -> bool:
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(tuple(self._tasks.values()), timeout=seconds)
        return not pending

    # ------------------------------------------------------------------ name, registration and heartbeat

    def name_known_free(self) -> None:
        """The caller knows no other live process can hold the name (standalone holds its database's
        lock): :meth:`ensure_name_free` need not watch a heartbeat left under it age."""
        self._name_free = True

    async def ensure_name_free(self) -> None:
        """Return once no live process holds the name; raise :class:`AgentNameInUse` if one does. The
        Service asks before anything it does in the name (failing the uploads an earlier process of this
        name was receiving); :meth:`start` asks too, and a name found free once is not watched again.

        A heartbeat younger than the liveness window is either a live duplicate's or the last one of a
        predecessor that crashed (kill -9: no STOPPED mark). Refusing would keep a crashed instance from
        ever restarting within the window, and taking over would revoke a live one's leases; so watch
        it: one that moves on is a live holder, one that ages past the window a dead one, whose runs the
        recovery then takes over (as the lease reaper of any instance would, at the same moment)."""
        if self._name_free:
            return
        await self._watch_name()
        self._name_free = True

    async def _watch_name(self) -> None:
        window = self._heartbeat_interval * _MISSED_HEARTBEATS
        first: datetime | None = None
        while True:
            seen = await self._holder_heartbeat()
            if seen is None:
                return
            if first is not None and seen > first:
                raise self._name_in_use(seen)
            age = self._clock() - seen
            if age >= window:
                return
            if first is None:
                first = seen
                _log.warning(
                    "embedded agent name %r reported a heartbeat %.1f s ago; waiting up to %.1f s to tell a "
                    "crashed predecessor (its heartbeat ages) from a live instance (it reports again)",
                    self._settings.agent_name,
                    age.total_seconds(),
                    (window - age).total_seconds(),
                    extra={"event": "AGENT_NAME_WAIT"},
                )
            await self._sleep(min(window - age, self._heartbeat_interval).total_seconds())

    async def _holder_heartbeat(self) -> datetime | None:
        """The last heartbeat under this agent's name; ``None`` when no process may hold it (never
        registered, never reported, or stopped cleanly)."""
        async with self._uow(read_only=True) as uow:
            holder = await find_embedded_agent(uow, self._workspace_id, self._settings.agent_name)
        if holder is None or holder.status in _RELEASED:
            return None
        return holder.last_seen_at

    def _name_in_use(self, seen: datetime) -> AgentNameInUse:
        name = self._settings.agent_name
        age = max(0.0, (self._clock() - seen).total_seconds())
        _log.error(
            "embedded agent name %r is in use: its agent reported a heartbeat %.1f s ago, so another live "
            "instance runs under it; not starting this instance's agent (give each instance its own "
            "agent.embedded.name / WEPUSH_AGENT_EMBEDDED_NAME)",
            name,
            age,
            extra={"event": "AGENT_NAME_IN_USE"},
        )
        return AgentNameInUse(
            f"the embedded agent name {name!r} is in use by another live instance (heartbeat {age:.1f} s "
            "ago); give each instance its own agent.embedded.name / WEPUSH_AGENT_EMBEDDED_NAME"
        )

    async def _register(self) -> Agent:
        async with self._uow() as uow:
            return await register_agent(
                uow,
                workspace_id=self._workspace_id,
                name=self._settings.agent_name,
                version=self._version,
                catalog=self._catalog,
                capacity=self._capacity(),
                now=self._clock(),
            )

    def _capacity(self) -> dict[str, int]:
        return {
            "maxRuns": self._settings.max_runs,
            "maxConcurrency": self._settings.max_concurrency,
            "activeRuns": len(self._executions),
        }

    async def _heartbeat(self, status: AgentStatus) -> None:
        if self._agent is None:
            return
        with self._heartbeat_failures.attempt():
            async with self._uow() as uow:
                await uow.agents.record_heartbeat(
                    self._agent.id, status=status, seen_at=self._clock(), capacity=self._capacity()
                )

    # ------------------------------------------------------------------ recovery

    async def _recover_at_start(self) -> None:
        """Leases still ACTIVE under this agent belong to a process that died: revoke them and recover."""
        async with self._uow(read_only=True) as uow:
            mine = await uow.leases.list_for_agent(self.agent_id, active_only=True)
        for lease in mine:
            await self._recovery.recover_lease(lease, RESTART_CAUSE)
        # A recovery interrupted by the restart, or a lease that expired while nobody watched.
        await self._recover_orphans((*EXECUTING_STATES, RunState.LOST, RunState.RECOVERING), RESTART_CAUSE)

    async def _recover_orphans(self, states: tuple[RunState, ...], cause: str) -> None:
        after: Keyset | None = None
        while True:
            async with self._uow(read_only=True) as uow:
                page = await uow.runs.scan(states, PageRequest(limit=100, after=after))
            for run in page.items:
                if run.id in self._executions:
                    continue
                if run.state is RunState.RECOVERING:
                    await self._recovery.recover_run(run, cause)
                else:
                    await self._recovery.recover_orphan(run.workspace_id, run.id, cause)
            if page.next_after is None:
                return
            after = page.next_after

    # ------------------------------------------------------------------ loops

    async def _claim_loop(self) -> None:
        """Transient failures are retried on the next scan; a claimer that keeps failing ends the loop, and
        with it the agent (see ``failure``), instead of spinning silently. A database outage is not such a
        failure: the claimer waits it out however long it lasts (every other part of the Service does; an
        agent that gave up after a two-minute outage sent nothing again until the Service was restarted)."""
        assert self._claim_hint is not None
        failures = 0
        while True:
            try:
                while len(self._tasks) < self._settings.max_runs:
                    execution = await self._claim_one()
                    if execution is None:
                        break
                    self._launch(execution)
            except Exception as error:
                if database_outage(error) is None:
                    failures += 1
                    if failures >= self._settings.claim_failure_limit:
                        raise
                self._claim_failures.failed(error)
            else:
                failures = 0
                self._claim_failures.succeeded()
            await self._claim_hint.wait(self._settings.scan_interval.total_seconds())

    async def _claim_one(self) -> RunExecution | None:
        """Claim the oldest PENDING run whose provider this agent has, in one short transaction that also
        records RUN_LEASED."""
        after: Keyset | None = None
        async with self._uow() as uow:
            while True:
                page = await uow.runs.scan([RunState.PENDING], PageRequest(limit=50, after=after))
                for run in page.items:
                    if run.provider_id not in self._catalog:
                        continue
                    now = self._clock()
                    expires = now + self._settings.lease_ttl
                    claimed = await uow.leases.claim(
                        run.workspace_id, run.id, self.agent_id, expires_at=expires, ack_deadline=expires
                    )
                    if claimed is None:
                        continue
                    await uow.run_events.append(
                        run.workspace_id,
                        run.id,
                        [
                            RunEventDraft(
                                type="RUN_LEASED",
                                occurred_at=now,
                                data={
                                    "leaseId": claimed.lease.id,
                                    "agentId": self.agent_id,
                                    "epoch": claimed.lease.epoch,
                                    "expiresAt": format_instant(expires),
                                },
                            )
                        ],
                    )
                    leased = await uow.runs.get(run.workspace_id, run.id)
                    return RunExecution(self._context, claimed, leased)
                if page.next_after is None:
                    return None
                after = page.next_after

    def _run_log_context(self, execution: RunExecution) -> LogContextBinding:
        """The run's ids in the log context; the execution task runs under them, and so does every call
        another loop makes into the execution (commands, lease renewal)."""
        run = execution.run
        return bind_log_context(
            workspace_id=run.workspace_id,
            run_id=run.id,
            agent_id=self.agent_id,
            lease_id=execution.lease.id,
            provider_id=run.provider_id,
        )

    def _launch(self, execution: RunExecution) -> None:
        run_id = execution.run_id
        with self._run_log_context(execution):
            _log.info(
                "run %s: claimed under lease %s (epoch %d)",
                run_id,
                execution.lease.id,
                execution.lease.epoch,
                extra={"event": "RUN_CLAIMED"},
            )
            # The task copies the context now: the execution, the engine and its workers log the run's ids.
            task = asyncio.create_task(execution.execute(), name=f"run:{run_id}")
        self._executions[run_id] = execution
        self._tasks[run_id] = task

        def finished(done: asyncio.Task[None]) -> None:
            self._executions.pop(run_id, None)
            self._tasks.pop(run_id, None)
            for failures in (self._delivery_failures, self._renew_failures):
                failures.forget(f"run {run_id}")
            if not done.cancelled() and done.exception() is not None:
                # The lease is no longer renewed; the reaper recovers the run once it expires.
                with self._run_log_context(execution):
                    _log.error(
                        "run %s: execution failed",
                        run_id,
                        exc_info=done.exception(),
                        extra={"event": "RUN_EXECUTION_FAILED"},
                    )
            if self._claim_hint is not None:
                self._claim_hint.wake()

        task.add_done_callback(finished)

    async def _command_loop(self) -> None:
        assert self._command_hint is not None
        while True:
            for run_id, execution in tuple(self._executions.items()):
                with self._run_log_context(execution), self._delivery_failures.attempt(f"run {run_id}"):
                    async with self._uow(read_only=True) as uow:
                        commands = await pending_commands(uow, run_id)
                    for command in commands:
                        if not await execution.deliver(command):
                            break
            await self._command_hint.wait(self._settings.command_poll_interval.total_seconds())

    async def _renew_loop(self) -> None:
        interval = self._heartbeat_interval.total_seconds()
        while True:
            # Side by side: through a database outage each renewal waits until its own lease's expiry, and
            # none may hold up another's once the database is back.
            await asyncio.gather(*(self._renew(e) for e in tuple(self._executions.values())))
            await self._heartbeat(AgentStatus.ONLINE)
            await asyncio.sleep(interval)

    async def _renew(self, execution: RunExecution) -> None:
        # Rarely an outage (``renew`` waits those out until the lease's expiry, then reports the lease
        # lost): tried again on the next pass. Ending the loop would shut the whole agent down for good; a
        # lease that stays unrenewed expires and is recovered.
        with self._run_log_context(execution), self._renew_failures.attempt(f"run {execution.run_id}"):
            await execution.renew()

    async def _reaper_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.scan_interval.total_seconds())
            with self._reaper_failures.attempt():
                await self._reap()

    async def _reap(self) -> None:
        async with self._uow() as uow:
            expired = await uow.leases.expire_overdue(self._clock(), 100)
        for lease in expired:
            mine = self._executions.get(lease.run_id)
            if mine is not None and mine.lease.id == lease.id:
                with self._run_log_context(mine):
                    await mine.renew()  # fails: the execution learns its lease is gone and stops
            await self._recovery.recover_lease(lease, EXPIRED_CAUSE)
        await self._recover_orphans(tuple(EXECUTING_STATES), EXPIRED_CAUSE)


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is None or task.done():
        return
    task.cancel()
    # wait() never raises the task's own CancelledError, yet still lets a cancellation of the caller through.
    await asyncio.wait([task])
