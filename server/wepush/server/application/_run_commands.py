"""Operator commands on a run: pause, resume, cancel, change concurrency (seed: RunCommandService).

Accepting a command is one transaction: check the caller, check the command against the run's state
(``check_command``: 409 RUN_STATE_CONFLICT naming the state and the commands it allows), persist it
ACCEPTED and return 202 without waiting. The executor picks it up (woken by the availability hint),
applies it, acknowledges it (APPLIED or REJECTED) and records the resulting run events; the run state
itself moves when those events are stored (RUN_PAUSED → PAUSED, RUN_CANCELLING → CANCELLING ...).

One case has no executor to wait for: a PENDING run has no lease yet, so CANCEL is applied by the Service
on the spot, in the same transaction — PENDING → CANCELLED, every recipient recorded UNSENT (none was
ever handed to a provider), the command APPLIED, and COMMAND_ACKNOWLEDGED + RUN_COMPLETED appended. The
conditional transition makes this safe against a concurrent claim: whichever commits first wins, the
other sees the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from wepush.server.application._run_errors import ConcurrencyOutOfRange
from wepush.server.application._run_queries import policy_range
from wepush.server.application.execution import RecipientScope, RunSnapshot, item_id_for, read_recipients
from wepush.server.domain import (
    ItemResult,
    ItemState,
    JsonObject,
    Run,
    RunCommand,
    RunCommandType,
    RunCounts,
    RunEventDraft,
    RunState,
    UnitOfWork,
    check_command,
    new_id,
)

UNSENT_BATCH = 1000

_ENGINE_COMMAND_NAMES = {
    RunCommandType.PAUSE: "PauseRun",
    RunCommandType.RESUME: "ResumeRun",
    RunCommandType.CANCEL: "CancelRun",
    RunCommandType.CHANGE_CONCURRENCY: "ChangeConcurrency",
}

AUDIT_ACTIONS = {
    RunCommandType.PAUSE: "run.pause",
    RunCommandType.RESUME: "run.resume",
    RunCommandType.CANCEL: "run.cancel",
    RunCommandType.CHANGE_CONCURRENCY: "run.concurrency.change",
}


@dataclass(frozen=True, slots=True)
class CommandRequest:
    type: RunCommandType
    reason: str | None = None
    target: int | None = None

    def payload(self) -> JsonObject:
        if self.type is RunCommandType.CANCEL:
            return {"reason": self.reason}
        if self.type is RunCommandType.CHANGE_CONCURRENCY:
            return {"target": self.target}
        return {}


@dataclass(frozen=True, slots=True)
class AcceptedCommand:
    command: RunCommand
    applied_by_service: bool


def _check_target(snapshot: RunSnapshot, target: int | None) -> int:
    low, high, _ = policy_range(snapshot)
    if target is None or not low <= target <= high:
        raise ConcurrencyOutOfRange("/target", target or 0, (low, high))
    return target


async def accept_command(
    uow: UnitOfWork, workspace_id: str, run_id: str, request: CommandRequest, now: datetime
) -> AcceptedCommand:
    # Held until the command is stored: a run that is finishing either waits and then answers the
    # command (it reads pending commands after it has moved), or is seen finished here and refuses it.
    run = await uow.runs.get(workspace_id, run_id, referencing=True)
    target_state = check_command(run.id, run.state, request.type)
    if request.type is RunCommandType.CHANGE_CONCURRENCY:
        _check_target(RunSnapshot.from_json(run.snapshot), request.target)
    command = await uow.run_commands.add(
        RunCommand(
            workspace_id=workspace_id,
            run_id=run.id,
            command_id=new_id(),
            type=request.type,
            payload=request.payload(),
            created_at=now,
            updated_at=now,
        )
    )
    if run.state is RunState.PENDING and target_state is RunState.CANCELLED:
        command = await cancel_pending(uow, run, command, request.reason, now)
        return AcceptedCommand(command, applied_by_service=True)
    return AcceptedCommand(command, applied_by_service=False)


async def _record_unsent(uow: UnitOfWork, run: Run) -> None:
    """Every recipient of the run (the retry set for a resend) as UNSENT, under the item ids the executor
    would have used, so item pages and a later resend see them like any other outcome."""
    scope = RecipientScope.of_run(run)
    after: int | None = None
    while True:
        page = await read_recipients(uow, scope, after, UNSENT_BATCH)
        if page.items:
            await uow.run_items.record_results(
                run.workspace_id,
                run.id,
                [
                    ItemResult(
                        item_id=item_id_for(run.id, r.snapshot_id, r.sequence),
                        sequence=r.sequence,
                        state=ItemState.UNSENT,
                        attempt=0,
                    )
                    for r in page.items
                ],
            )
        if page.next_after is None:
            return
        after = page.next_after


async def cancel_pending(
    uow: UnitOfWork, run: Run, command: RunCommand, reason: str | None, now: datetime
) -> RunCommand:
    counts = RunCounts(total=run.recipient_count, unsent=run.recipient_count)
    # Counters first: they are refused once the run is terminal.
    await uow.runs.record_progress(run.workspace_id, run.id, counts=counts, current_concurrency=0)
    cancelled = await uow.runs.transition(
        run.workspace_id,
        run.id,
        expected_version=run.version,
        target=RunState.CANCELLED,
        reason=reason or "Cancelled before any agent started it.",
    )
    await _record_unsent(uow, cancelled)
    applied = await uow.run_commands.record_ack(command.command_id, applied=True, result_message="cancelled")
    await uow.run_events.append(
        run.workspace_id,
        run.id,
        [
            RunEventDraft(
                type="COMMAND_ACKNOWLEDGED",
                occurred_at=now,
                data={
                    "commandId": command.command_id,
                    "command": _ENGINE_COMMAND_NAMES[command.type],
                    "accepted": True,
                    "code": "ACCEPTED",
                },
            ),
            RunEventDraft(
                type="RUN_COMPLETED",
                occurred_at=now,
                data={
                    "finalState": RunState.CANCELLED.value,
                    "counts": {
                        "total": counts.total,
                        "succeeded": 0,
                        "failed": 0,
                        "unknown": 0,
                        "unsent": counts.unsent,
                        "skipped": 0,
                        "inFlight": 0,
                        "pending": 0,
                        "retried": 0,
                    },
                    "stopReason": "CANCELLED",
                    "artifacts": [],
                },
            ),
        ],
    )
    return applied


RenderCommand = Callable[[RunCommand], JsonObject]
