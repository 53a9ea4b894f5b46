"""Operator commands on a run: pause, resume, cancel, change concurrency (seed: RunCommandService).

Accepting a command is one transaction: check the caller, check the command against the run's state
(``check_command``: 409 RUN_STATE_CONFLICT naming the state and the commands it allows), persist it
ACCEPTED and return 202 without waiting. The executor picks it up (woken by the availability hint),
applies it, acknowledges it (APPLIED or REJECTED) and records the resulting run events; the run state
itself moves when those events are stored (RUN_PAUSED → PAUSED, RUN_CANCELLING → CANCELLING ...).

One case has no executor to wait for: a PENDING run has no lease yet, so CANCEL is applied by the Service
on the spot, in the same transaction — PENDING → CANCELLING, the command APPLIED, RUN_CANCELLING and
COMMAND_ACKNOWLEDGED appended. The Service's finisher then records every recipient UNSENT (none was ever
handed to a provider) in batches of short transactions and ends the run CANCELLED, so a cancel answers at
once and never holds the database for the length of a large audience. The conditional transition makes
this safe against a concurrent claim: whichever commits first wins, the other sees the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from wepush.server.application._run_errors import ConcurrencyOutOfRange
from wepush.server.application._run_queries import policy_range
from wepush.server.application.execution import RunSnapshot
from wepush.server.domain import (
    JsonObject,
    Run,
    RunCommand,
    RunCommandType,
    RunEventDraft,
    RunState,
    UnitOfWork,
    check_command,
    new_id,
)

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
    check_command(run.id, run.state, request.type)
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
    if run.state is RunState.PENDING and request.type is RunCommandType.CANCEL:
        command = await cancel_pending(uow, run, command, request.reason, now)
        return AcceptedCommand(command, applied_by_service=True)
    return AcceptedCommand(command, applied_by_service=False)


async def cancel_pending(
    uow: UnitOfWork, run: Run, command: RunCommand, reason: str | None, now: datetime
) -> RunCommand:
    """PENDING → CANCELLING and the command APPLIED, in the request's one short transaction whatever the
    audience size; the Service's finisher then records every recipient UNSENT in batches and ends the run
    CANCELLED (``CancelledRunFinisher``), as an engine does after its own cancel."""
    reason = reason or "Cancelled before any agent started it."
    await uow.runs.transition(
        run.workspace_id, run.id, expected_version=run.version, target=RunState.CANCELLING, reason=reason
    )
    applied = await uow.run_commands.record_ack(command.command_id, applied=True, result_message="cancelling")
    await uow.run_events.append(
        run.workspace_id,
        run.id,
        [
            RunEventDraft(type="RUN_CANCELLING", occurred_at=now, data={"reason": reason}),
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
        ],
    )
    return applied


RenderCommand = Callable[[RunCommand], JsonObject]
