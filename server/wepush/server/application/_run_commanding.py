"""Accepting operator commands for a run (one transaction each) and reading them back."""

from __future__ import annotations

from collections.abc import Callable

from wepush.server.application._run_commands import AUDIT_ACTIONS, CommandRequest, accept_command
from wepush.server.application._run_context import RESOURCE, RunUseCases
from wepush.server.application.auth import Principal, Role
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import JsonObject, NotFound, RunCommand, RunCommandType


class RunCommanding(RunUseCases):
    async def submit_command(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        request: CommandRequest,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[RunCommand], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        action_name = AUDIT_ACTIONS[request.type]
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, action_name, resource_id=run_id, trace_id=trace_id
        )

        async def attempt() -> Outcome:
            now = self._deps.clock()
            async with self._deps.uow() as uow:

                async def action() -> Outcome:
                    accepted = await accept_command(uow, workspace_id, run_id, request, now)
                    fields = {
                        RunCommandType.CANCEL: ["reason"],
                        RunCommandType.CHANGE_CONCURRENCY: ["target"],
                    }
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        action_name,
                        RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=run_id,
                        fields=fields.get(request.type, []),
                        summary=f"{request.type.value} accepted as command {accepted.command.command_id}"
                        + (
                            " and applied at once (the run had not started: its recipients are"
                            " recorded UNSENT next)"
                            if accepted.applied_by_service
                            else ""
                        ),
                        trace_id=trace_id,
                    )
                    return Outcome(202, render(accepted.command), run_id)

                return await guarded(uow, idempotency, workspace_id=workspace_id, now=now, action=action)

        outcome = await once_more_on_race(idempotency, attempt)
        self._after_commit(outcome)
        return outcome

    async def get_command(
        self, principal: Principal, workspace_id: str, run_id: str, command_id: str
    ) -> RunCommand:
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.command.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            await uow.runs.get(workspace_id, run_id)
            command = await uow.run_commands.get_by_command_id(command_id)
        if command is None or command.run_id != run_id or command.workspace_id != workspace_id:
            raise NotFound("run command", command_id)
        return command
