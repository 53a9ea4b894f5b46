"""RunCoordinator: the one task that owns a run from RUNNING to its terminal state."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from typing import Any

from ._commands import CommandResult, RunCommand
from ._control import RunControl, StopReason
from ._enums import ErrorCategory, ItemState, RunEventType, RunState
from ._hotpath import item_result
from ._items import SKIPPED, UNSENT, ItemExecutor, ItemOutcome
from ._lifecycle import RunShutdown
from ._options import EngineOptions
from ._ports import ExecutionPorts, RecipientSource
from ._provider import ProviderDescriptor
from ._ratelimit import RateLimiter
from ._recipients import RecipientRecord
from ._results import Counts, ExecutionError, ItemResult, ProviderResult, RunSummary
from ._retry import AUTH_CATEGORIES, RetryRules
from ._sessions import ProviderSessionManager
from ._spec import RunExecutionSpec
from ._tally import Tally
from ._workers import ItemWorkers

__all__ = ["RunCoordinator"]


class RunCoordinator:
    """Reads recipients in batches, runs them on ``ItemWorkers`` under the ConcurrencyGate, applies
    commands, and shuts down in the seed's order (see ``RunShutdown``)."""

    def __init__(
        self,
        *,
        spec: RunExecutionSpec,
        ports: ExecutionPorts,
        descriptor: ProviderDescriptor,
        sessions: ProviderSessionManager,
        options: EngineOptions,
        capacity: int | None,
    ) -> None:
        self._spec = spec
        self._ports = ports
        self._clock = ports.clock
        self._options = options
        self._descriptor = descriptor
        self._sessions = sessions
        policies = spec.policies
        caps = [
            c
            for c in (policies.concurrency.max, descriptor.concurrency_limit, options.capacity, capacity)
            if c
        ]
        self._shutdown = RunShutdown(spec.run_id, ports, self._clock, options)
        self._watchdogs: set[asyncio.Task[None]] = set()
        self._control = RunControl(
            policies=policies,
            caps=caps,
            events=self._shutdown.events,
            clock=self._clock,
            spawn=self._spawn_watchdog,
        )
        self._tally = Tally()
        self._auth_streak = 0
        self._item_errors_emitted = 0
        self._item_errors_suppressed = 0
        self._last_progress: Counts | None = None
        self._suppressed: list[ExecutionError] = []
        self._simulate_dry_run = spec.dry_run and not descriptor.capabilities.dry_run
        self._started_at = self._clock.now()
        self._started_mono = self._clock.monotonic()
        run_timeout = policies.timeout.run
        self._run_deadline = None if run_timeout is None else self._started_mono + run_timeout.total_seconds()
        self._items = ItemExecutor(
            run_id=spec.run_id,
            message_config=spec.message_config,
            clock=self._clock,
            control=self._control,
            limiter=RateLimiter(policies.rate_limit, self._clock),
            rules=RetryRules(
                policies.retry,
                descriptor.capabilities.safe_to_retry_on_timeout,
                # Jitter only spreads retries out; a seedable PRNG keeps schedules reproducible in tests.
                random.Random(options.random_seed),  # noqa: S311
            ),
            sessions=sessions,
            item_timeout=policies.timeout.item,
            run_deadline=self._run_deadline,
            observer=ports.observer,
        )
        self._control.in_flight = lambda: self.counts().in_flight
        self._control.cancel_in_flight = self._items.cancel_in_flight
        self._workers = ItemWorkers(
            control=self._control,
            batcher=self._shutdown.batcher,
            tally=self._tally,
            read=lambda: self._read(ports.recipient_source),
            execute=self._items.execute,
            crashed=self._crashed,
            finish=self._finalize,
            skip=self._skip if self._simulate_dry_run else None,
            on_error=self._dispatch_failed,
            low_water=options.read_low_water,
            fence=ports.dispatch_fence,
            on_fence_error=self._fence_failed,
        )
        self._future: asyncio.Future[RunSummary] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    # ----------------------------------------------------------------- observation

    @property
    def run_id(self) -> str:
        return self._spec.run_id

    @property
    def state(self) -> RunState:
        return self._control.state

    @property
    def effective_concurrency(self) -> int:
        return self._control.gate.limit

    @property
    def peak_concurrency(self) -> int:
        return self._control.gate.peak

    def counts(self) -> Counts:
        t = self._tally
        in_flight, pending = t.in_flight, t.pending
        if self._control.state is RunState.PAUSED:
            # Items that started but wait (for a rate-limit token, a retry's backoff, the resume) make
            # no provider call while the run is paused: they are pending, not in flight.
            waiting = self._items.waiting
            in_flight -= waiting
            pending += waiting
        return Counts(
            total=t.total,
            succeeded=t.succeeded,
            failed=t.failed,
            unknown=t.unknown,
            unsent=t.unsent,
            skipped=t.skipped,
            in_flight=in_flight,
            pending=pending,
            retried=self._items.retried,
        )

    async def completion(self) -> RunSummary:
        return await asyncio.shield(self._future)

    # ----------------------------------------------------------------- lifecycle

    def begin(self) -> None:
        events = self._shutdown.events
        events.emit(
            RunEventType.RUN_STARTED,
            {
                "providerId": self._descriptor.provider_id,
                "providerVersion": self._descriptor.version,
                "dryRun": self._spec.dry_run,
                "targetConcurrency": self._control.target,
                "effectiveConcurrency": self._control.gate.limit,
            },
        )
        self._shutdown.start_background()
        self._spawn_watchdog(self._ticker())
        if self._run_deadline is not None:
            self._spawn_watchdog(self._deadline_watch(self._run_deadline - self._started_mono))
        self._task = asyncio.create_task(self._run(), name=f"run-coordinator:{self.run_id}")

    async def _run(self) -> None:
        try:
            try:
                await self._dispatch()
            except Exception as exc:
                self._suppressed.append(ExecutionError.from_exception("dispatch", "INTERNAL_ERROR", exc))
                self._control.request_stop(StopReason.INTERNAL_ERROR)
            # Settle in-flight items: every worker finalises the items it started.
            await self._workers.join()
            self._items.deadlines.close()
            self._control.finishing = True
            for task in tuple(self._watchdogs):
                task.cancel()
            await asyncio.gather(*tuple(self._watchdogs), return_exceptions=True)
            summary = await self._complete()
            self._future.set_result(summary)
        except asyncio.CancelledError:
            # The loop is being torn down under the run; nobody may be left to read an exception.
            self._future.cancel()
            raise
        except BaseException as exc:
            if not self._future.done():
                self._future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _complete(self) -> RunSummary:
        shutdown = self._shutdown
        await shutdown.finish_results()
        if shutdown.batcher.failure is not None and self._control.stop_reason is None:
            self._control.stop_reason = StopReason.RESULT_SINK_FAILED
        artifacts = await shutdown.close_sinks()
        final = self._final_state()
        self._control.state = final
        counts = self.counts()
        events = shutdown.events
        events.emit(RunEventType.PROGRESS, self._progress_data(counts), force=True)
        events.emit(
            RunEventType.RUN_COMPLETED,
            {
                "finalState": final.value,
                "counts": counts.to_json_dict(),
                "stopReason": None if self._control.stop_reason is None else self._control.stop_reason.value,
                "itemErrorEventsSuppressed": self._item_errors_suppressed,
                "artifacts": [a.name for a in artifacts],
            },
        )
        await shutdown.finish_events()
        await shutdown.close_provider(self._sessions)
        await shutdown.close_source()
        await shutdown.close_event_sink()
        return RunSummary(
            run_id=self.run_id,
            final_state=final,
            total=counts.total,
            succeeded=counts.succeeded,
            failed=counts.failed,
            unknown=counts.unknown,
            unsent=counts.unsent,
            skipped=counts.skipped,
            retried=counts.retried,
            started_at=self._started_at,
            ended_at=self._clock.now(),
            artifacts=artifacts,
            suppressed_errors=(*self._suppressed, *shutdown.errors),
        )

    def _final_state(self) -> RunState:
        t = self._tally
        if self._control.stop_reason is StopReason.CANCELLED:
            return RunState.CANCELLED
        if self._control.stop_reason is None and t.succeeded + t.skipped == t.total:
            return RunState.SUCCEEDED
        return RunState.FAILED if t.succeeded == 0 else RunState.PARTIAL

    # ----------------------------------------------------------------- dispatch

    async def _dispatch(self) -> None:
        workers = self._workers
        workers.start()
        await workers.dispatched()
        queue = workers.queue
        while queue:
            self._tally.pending -= 1
            self._finalize(queue.popleft(), UNSENT)
        if (
            not workers.exhausted
            and not workers.failed
            and self._control.stop_reason is not StopReason.SOURCE_FAILED
        ):
            await self._drain_unsent()

    def _dispatch_failed(self, exc: Exception) -> None:
        self._suppressed.append(ExecutionError.from_exception("dispatch", "INTERNAL_ERROR", exc))
        self._control.request_stop(StopReason.INTERNAL_ERROR)

    def _fence_failed(self, exc: Exception) -> None:
        # The source cannot record what may be sent, so nothing more may be: as when it cannot be read.
        self._suppressed.append(ExecutionError.from_exception("recipients.mark", "DISPATCH_MARK_FAILED", exc))
        self._control.request_stop(StopReason.SOURCE_FAILED)

    def _skip(self, record: RecipientRecord) -> None:
        self._finalize(record, SKIPPED)

    async def _read(self, source: RecipientSource) -> list[RecipientRecord] | None:
        try:
            return list(await source.next_batch(self._options.read_batch_size))
        except Exception as exc:
            self._suppressed.append(
                ExecutionError.from_exception("recipients.read", "SOURCE_READ_FAILED", exc)
            )
            self._control.request_stop(StopReason.SOURCE_FAILED)
            return None

    async def _drain_unsent(self) -> None:
        """A stopped run still accounts for every recipient: the rest of the audience is UNSENT."""
        source = self._ports.recipient_source
        batcher = self._shutdown.batcher
        while True:
            await batcher.wait_capacity()
            batch = await self._read(source)
            if not batch:
                return
            self._tally.total += len(batch)
            for record in batch:
                self._finalize(record, UNSENT)

    def _crashed(self, exc: Exception) -> ItemOutcome:
        self._suppressed.append(ExecutionError.from_exception("item", "INTERNAL_ERROR", exc))
        failure = ProviderResult.failure(ErrorCategory.INTERNAL, "ENGINE_INTERNAL_ERROR", type(exc).__name__)
        return (ItemState.UNKNOWN, 1, failure, None, self._clock.now())

    def _finalize(self, record: RecipientRecord, outcome: ItemOutcome) -> None:
        state, attempt, result, started_at, finished_at = outcome
        if result is None:
            item = item_result(
                self._spec.run_id,
                record.item_id,
                record.sequence,
                state,
                attempt,
                None,
                None,
                None,
                None,
                None,
                False,
                started_at,
                finished_at,
                record.fields,
            )
        else:
            body, truncated = (None, False) if result.response_body is None else self._shape_body(result)
            diagnostic = result.diagnostic
            redactor = self._ports.redactor
            if redactor is not None and diagnostic is not None:
                diagnostic = redactor.text(diagnostic)
            item = item_result(
                self._spec.run_id,
                record.item_id,
                record.sequence,
                state,
                attempt,
                result.category,
                result.provider_code,
                diagnostic,
                result.external_request_id,
                body,
                truncated,
                started_at,
                finished_at,
                record.fields,
            )
        tally = self._tally
        if state is ItemState.SUCCEEDED:
            tally.succeeded += 1
        else:
            tally.record(state)
        batcher = self._shutdown.batcher
        batcher.add(item)
        if batcher.failure is not None:
            self._control.request_stop(StopReason.RESULT_SINK_FAILED)
        if state is ItemState.FAILED or state is ItemState.UNKNOWN:
            self._emit_item_error(item)
        if result is not None:
            # Run-level circuit breaker: consecutive auth failures stop the run.
            if result.category in AUTH_CATEGORIES:
                self._auth_streak += 1
                if self._auth_streak >= self._options.auth_failure_threshold:
                    self._control.request_stop(StopReason.AUTH_CIRCUIT_OPEN)
            else:
                self._auth_streak = 0

    def _shape_body(self, result: ProviderResult) -> tuple[str | None, bool]:
        policy = self._spec.policies.result
        if result.response_body is None or not policy.save_response_body:
            return None, False
        body = result.response_body
        redactor = self._ports.redactor
        if redactor is not None:
            # Before the cut, so that a secret straddling it is still masked whole.
            body = redactor.text(body)
        raw = body.encode("utf-8")
        if len(raw) <= policy.response_body_max_bytes:
            return body, result.response_truncated
        cut = raw[: policy.response_body_max_bytes].decode("utf-8", errors="ignore")
        return cut, True

    def _emit_item_error(self, item: ItemResult) -> None:
        if self._item_errors_emitted >= self._options.item_error_event_limit:
            self._item_errors_suppressed += 1
            return
        self._item_errors_emitted += 1
        self._shutdown.events.emit(
            RunEventType.ITEM_ERROR,
            {
                "itemId": item.item_id,
                "sequence": item.sequence,
                "state": item.state.value,
                "attempt": item.attempt,
                "errorCategory": None if item.error_category is None else item.error_category.value,
                "providerCode": item.provider_code,
                "diagnostic": item.diagnostic,
            },
        )

    # ----------------------------------------------------------------- stopping and timers

    def _spawn_watchdog(self, coro: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._watchdogs.add(task)
        task.add_done_callback(self._watchdogs.discard)

    async def _ticker(self) -> None:
        interval = self._options.progress_interval.total_seconds()
        while True:
            await self._clock.sleep(interval)
            counts = self.counts()
            # Only an event the dispatcher kept counts as sent: one dropped over the bound is sent again at
            # the next tick, as no newer one may follow (a paused run's counts stop changing).
            if counts != self._last_progress and self._shutdown.events.emit(
                RunEventType.PROGRESS, self._progress_data(counts)
            ):
                self._last_progress = counts
            self._shutdown.batcher.tick()

    async def _deadline_watch(self, seconds: float) -> None:
        await self._clock.sleep(seconds)
        self._control.request_stop(StopReason.RUN_DEADLINE)
        self._items.abort_in_flight("run deadline exceeded")

    def _progress_data(self, counts: Counts) -> dict[str, Any]:
        return {
            **counts.to_json_dict(),
            "state": self._control.state.value,
            "effectiveConcurrency": self._control.gate.limit,
        }

    def submit(self, command: RunCommand) -> CommandResult:
        return self._control.submit(command)
