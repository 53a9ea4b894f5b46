"""The fenced RunEventSink of an executing run, and how run events move the stored run state.

Engine events arrive with the engine's own sequence (1, 2, …); ``leases.accept_event_batch`` stores them
with the run's next sequences and skips any the lease already acknowledged, so a re-published batch is
never stored twice. In the same transaction the events that change the run (pause, resume, cancelling,
progress counters, concurrency) update the run row, so the state never disagrees with the event stream.

A database outage is waited out while the lease may still be ours (``LeaseGuard.retrying``); the engine
keeps the events meanwhile (coalescing progress). The terminal batch (``RUN_COMPLETED``) is held back: the
executor stores it together with the terminal state, the final counts and the lease release in one
transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from wepush.agent.engine import RunEvent as EngineRunEvent
from wepush.agent.engine import RunEventType
from wepush.server.domain import (
    RunCounts,
    RunEvent,
    RunEventDraft,
    RunState,
    UnitOfWork,
    can_transition,
)

from ._artifacts import RunLog, log_line
from ._fence import LeaseGuard
from ._metrics import RunMeter

__all__ = [
    "EventGapError",
    "FencedRunEventSink",
    "counts_from",
    "draft_of",
    "move_run",
    "path_to",
    "with_planned_total",
]

_STATE_EVENTS: Mapping[str, RunState] = {
    RunEventType.RUN_PAUSED.value: RunState.PAUSED,
    RunEventType.RUN_RESUMED.value: RunState.RUNNING,
    RunEventType.RUN_CANCELLING.value: RunState.CANCELLING,
}
_ERROR_EVENTS = frozenset({RunEventType.ITEM_ERROR.value, RunEventType.RUN_LOST.value})


class EventGapError(RuntimeError):
    """The lease has acknowledged fewer events than the batch assumes (events were lost in between)."""


def draft_of(event: EngineRunEvent) -> RunEventDraft:
    return RunEventDraft(type=event.type.value, occurred_at=event.occurred_at, data=dict(event.data))


def with_planned_total(event: EngineRunEvent, planned_total: int) -> EngineRunEvent:
    """A PROGRESS event counted against the run's whole recipient set.

    The engine reads recipients in batches and counts as ``total`` what it has read so far; a client
    drawing progress from it saw 1,000 of a 5,001-recipient run. The run knows its recipient count from
    the start: the recipients not read yet are pending too."""
    if event.type is not RunEventType.PROGRESS:
        return event
    read = int(event.data.get("total", 0))
    if read >= planned_total:
        return event
    unread = planned_total - read
    data = {**event.data, "total": planned_total, "pending": int(event.data.get("pending", 0)) + unread}
    return replace(event, data=data)


def counts_from(data: Mapping[str, Any], fallback: RunCounts | None = None) -> RunCounts:
    base = fallback or RunCounts()
    return RunCounts(
        total=int(data.get("total", base.total)),
        succeeded=int(data.get("succeeded", base.succeeded)),
        failed=int(data.get("failed", base.failed)),
        unknown=int(data.get("unknown", base.unknown)),
        unsent=int(data.get("unsent", base.unsent)),
        skipped=int(data.get("skipped", base.skipped)),
        retried=int(data.get("retried", base.retried)),
    )


def path_to(current: RunState, target: RunState) -> list[RunState] | None:
    """The transitions that take a run from ``current`` to ``target`` (at most one intermediate state:
    a paused run finishes through RUNNING, a running one is cancelled through CANCELLING)."""
    if current is target:
        return []
    if can_transition(current, target):
        return [target]
    for middle in (RunState.RUNNING, RunState.CANCELLING):
        if can_transition(current, middle) and can_transition(middle, target):
            return [middle, target]
    return None


async def move_run(
    uow: UnitOfWork, workspace_id: str, run_id: str, target: RunState, reason: str | None = None
) -> RunState:
    """Conditionally move the run to ``target`` (each step ``WHERE state IN … AND version = ?``); returns
    the state reached. A target that cannot be reached from the current state leaves the run as it is."""
    run = await uow.runs.get(workspace_id, run_id)
    steps = path_to(run.state, target)
    if not steps:
        return run.state
    for step in steps:
        run = await uow.runs.transition(
            workspace_id, run_id, expected_version=run.version, target=step, reason=reason
        )
    return run.state


class FencedRunEventSink:
    """The engine's RunEventSink for one run; also copies every event into the run log."""

    def __init__(
        self,
        guard: LeaseGuard,
        *,
        workspace_id: str,
        run_id: str,
        log: RunLog,
        clock: Callable[[], datetime],
        planned_total: int = 0,
        meter: RunMeter | None = None,
    ) -> None:
        self._guard = guard
        self._meter = meter
        self._planned_total = planned_total
        self._workspace_id = workspace_id
        self._run_id = run_id
        self._log = log
        self._clock = clock
        self._logged = 0
        self._counts: RunCounts | None = None
        self.final_events: list[EngineRunEvent] = []
        #: Why the engine began cancelling (its RUN_CANCELLING reason): an operator's cancel, or a policy
        #: such as an outlasted pause, which no command names.
        self.cancel_reason: str | None = None

    async def publish(self, events: Sequence[EngineRunEvent]) -> None:
        if not events:
            return
        events = [with_planned_total(event, self._planned_total) for event in events]
        for event in events:
            if event.sequence > self._logged:
                level = "ERROR" if event.type.value in _ERROR_EVENTS else "INFO"
                await self._log.append(
                    log_line(
                        event.occurred_at, event.type.value, event.data, run_id=self._run_id, level=level
                    )
                )
                self._logged = event.sequence
        cut = next((i for i, e in enumerate(events) if e.type is RunEventType.RUN_COMPLETED), len(events))
        if cut:
            await self._store(events[:cut])
        if cut < len(events):
            self.final_events = list(events[cut:])

    async def _store(self, events: Sequence[EngineRunEvent]) -> None:
        drafts = [draft_of(event) for event in events]

        async def store() -> None:
            async with self._guard.unchecked() as uow:
                ack = await uow.leases.accept_event_batch(
                    self._guard.fence, self._clock(), first_sequence=events[0].sequence, events=drafts
                )
                if ack.gap:
                    raise EventGapError(
                        f"run {self._run_id}: events before {events[0].sequence} were not stored"
                    )
                await self._apply(uow, ack.appended)

        # Through a database outage while the lease may still be ours: a batch stored twice (its commit
        # went through unacknowledged) is acknowledged, not appended, the second time.
        await self._guard.retrying(store)

    async def _apply(self, uow: UnitOfWork, stored: Sequence[RunEvent]) -> None:
        for event in stored:
            target = _STATE_EVENTS.get(event.type)
            if target is not None:
                reason = None
                if event.type == RunEventType.RUN_CANCELLING.value:
                    given = event.data.get("reason")
                    reason = given if isinstance(given, str) and given else None
                    self.cancel_reason = self.cancel_reason or reason
                await move_run(uow, self._workspace_id, self._run_id, target, reason)
            elif event.type == RunEventType.PROGRESS.value:
                self._counts = counts_from(event.data, self._counts)
                if self._meter is not None:
                    # Stored events only, each once: a batch the engine publishes again is not recounted.
                    self._meter.progress(self._counts, int(event.data.get("inFlight", 0)))
                await uow.runs.record_progress(
                    self._workspace_id,
                    self._run_id,
                    counts=self._counts,
                    current_concurrency=int(event.data.get("effectiveConcurrency", 0)),
                )
            elif event.type == RunEventType.CONCURRENCY_CHANGED.value:
                await uow.runs.record_progress(
                    self._workspace_id,
                    self._run_id,
                    counts=self._counts or (await uow.runs.get(self._workspace_id, self._run_id)).counts,
                    current_concurrency=int(event.data.get("effective", 0)),
                )

    async def flush(self) -> None:
        # Every publish commits its own transaction.
        return None

    async def close(self) -> None:
        return None
