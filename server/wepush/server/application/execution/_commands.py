"""Operator commands on the executor side: stored ``run_command`` rows → engine commands, and the answer."""

from __future__ import annotations

from wepush.agent.engine import CancelRun, ChangeConcurrency, CommandResult, PauseRun, ResumeRun
from wepush.agent.engine import RunCommand as EngineCommand
from wepush.server.domain import (
    Keyset,
    PageRequest,
    RunCommand,
    RunCommandState,
    RunCommandType,
    UnitOfWork,
)

__all__ = ["PENDING_COMMAND_STATES", "ack_message", "engine_command", "pending_commands", "reject_pending"]

PENDING_COMMAND_STATES = frozenset({RunCommandState.ACCEPTED, RunCommandState.DELIVERED})


def engine_command(command: RunCommand) -> EngineCommand:
    """Raises ``ValueError`` when the stored payload does not fit the command type."""
    cid = command.command_id
    if command.type is RunCommandType.PAUSE:
        return PauseRun(cid)
    if command.type is RunCommandType.RESUME:
        return ResumeRun(cid)
    if command.type is RunCommandType.CANCEL:
        reason = command.payload.get("reason")
        return CancelRun(cid, reason if isinstance(reason, str) and reason else None)
    target = command.payload.get("target")
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError("CHANGE_CONCURRENCY needs an integer target")
    return ChangeConcurrency(cid, target)


def ack_message(result: CommandResult) -> str | None:
    """The ``result_message`` stored with the acknowledgement: empty for a plain success."""
    if result.accepted:
        return result.message or None
    text = f"{result.code}: {result.message}" if result.message else result.code
    if result.allowed_range is not None:
        text += f" (allowed range {result.allowed_range[0]}..{result.allowed_range[1]})"
    return text


async def pending_commands(uow: UnitOfWork, run_id: str) -> list[RunCommand]:
    """The run's commands not yet acknowledged, oldest first (a run receives a handful, never thousands)."""
    found: list[RunCommand] = []
    after: Keyset | None = None
    while True:
        page = await uow.run_commands.list_for_run(run_id, PageRequest(limit=100, after=after))
        found += [c for c in page.items if c.state in PENDING_COMMAND_STATES]
        if page.next_after is None:
            return found
        after = page.next_after


async def reject_pending(uow: UnitOfWork, run_id: str, message: str) -> int:
    """Answer every unacknowledged command of a run nobody executes any more."""
    pending = await pending_commands(uow, run_id)
    for command in pending:
        await uow.run_commands.record_ack(command.command_id, applied=False, result_message=message)
    return len(pending)
