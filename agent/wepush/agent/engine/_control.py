"""RunControl: run state, the stop signal and command handling, shared by the coordinator and items."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine
from typing import Any

from ._commands import (
    CancelRun,
    ChangeConcurrency,
    CommandCode,
    CommandResult,
    PauseRun,
    ResumeRun,
    RunCommand,
)
from ._dispatcher import EventDispatcher
from ._enums import PauseTimeoutAction, RunEventType, RunState
from ._gate import ConcurrencyGate
from ._policies import ExecutionPolicies
from ._ports import ExecutionClock

__all__ = ["RunControl", "StopReason"]


class StopReason(enum.StrEnum):
    CANCELLED = "CANCELLED"
    AUTH_CIRCUIT_OPEN = "AUTH_CIRCUIT_OPEN"
    RUN_DEADLINE = "RUN_DEADLINE"
    RESULT_SINK_FAILED = "RESULT_SINK_FAILED"
    SOURCE_FAILED = "SOURCE_FAILED"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class RunControl:
    """Commands take effect synchronously (one event-loop step), so they can race each other and in-flight
    sends without locks: pause clears ``dispatch_open``, cancel and every other stop set ``stop``, close the
    gate and reopen ``dispatch_open`` so that every waiter wakes up and observes the stop."""

    def __init__(
        self,
        *,
        policies: ExecutionPolicies,
        caps: list[int],
        events: EventDispatcher,
        clock: ExecutionClock,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._policies = policies
        self._caps = caps
        self._events = events
        self._clock = clock
        self._spawn = spawn
        self._target = policies.concurrency.target
        self.gate = ConcurrencyGate(self._effective(self._target))
        self.stop = asyncio.Event()
        self.dispatch_open = asyncio.Event()
        self.dispatch_open.set()
        # ``dispatch_open`` is set and ``stop`` is not, as a plain attribute: the per-item checks read it
        # instead of calling two Event methods.
        self.dispatching = True
        self.stop_reason: StopReason | None = None
        self.state = RunState.RUNNING
        self.finishing = False
        self.in_flight: Callable[[], int] = lambda: 0
        self.cancel_in_flight: Callable[[str], None] = lambda reason: None
        self._commands: dict[str, CommandResult] = {}
        self._pause_epoch = 0

    @property
    def target(self) -> int:
        return self._target

    def request_stop(self, reason: StopReason) -> None:
        """The first reason wins; later ones are ignored."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        self.stop.set()
        self.dispatching = False
        self.gate.close()
        self.dispatch_open.set()

    def submit(self, command: RunCommand) -> CommandResult:
        """Apply a command once; a repeated ``command_id`` returns the first result unchanged."""
        previous = self._commands.get(command.command_id)
        if previous is not None:
            return previous
        result = self._apply(command)
        self._commands[command.command_id] = result
        if self.finishing:
            # The event stream is closing (or closed); the caller has the result in hand.
            return result
        self._events.emit(
            RunEventType.COMMAND_ACKNOWLEDGED,
            {
                "commandId": command.command_id,
                "command": type(command).__name__,
                "accepted": result.accepted,
                "code": result.code,
            },
        )
        return result

    def _apply(self, command: RunCommand) -> CommandResult:
        cid = command.command_id
        if self.state.is_terminal:
            return CommandResult(cid, False, CommandCode.RUN_STATE_CONFLICT, f"run is {self.state.value}")
        if self.finishing:
            # Every item has its outcome and the final state is being decided: the run is past
            # commands, though its state still reads RUNNING (or PAUSED, CANCELLING) until then.
            return CommandResult(cid, False, CommandCode.RUN_STATE_CONFLICT, "run is finishing")
        if isinstance(command, CancelRun):
            # A run already stopping for another reason (deadline, auth circuit...) keeps that reason.
            if not self.stop.is_set():
                self._cancel(command.reason or "cancelled by command")
            return CommandResult(cid, True, CommandCode.ACCEPTED)
        if self.stop.is_set():
            # Pausing a stopping run would strand the items that are winding down.
            return CommandResult(
                cid, False, CommandCode.RUN_STATE_CONFLICT, f"run is stopping ({self.stop_reason})"
            )
        if isinstance(command, PauseRun):
            if self.state is RunState.RUNNING:
                self._pause()
            return CommandResult(cid, True, CommandCode.ACCEPTED)
        if isinstance(command, ResumeRun):
            if self.state is RunState.PAUSED:
                self._resume("COMMAND")
            return CommandResult(cid, True, CommandCode.ACCEPTED)
        return self._change_concurrency(command)

    def _pause(self) -> None:
        self.state = RunState.PAUSED
        self.dispatch_open.clear()
        self.dispatching = False
        self._pause_epoch += 1
        self._events.emit(RunEventType.RUN_PAUSED, {"inFlight": self.in_flight()})
        limit = self._policies.pause.max_pause_duration
        if limit is not None:
            self._spawn(self._pause_watch(self._pause_epoch, limit.total_seconds()))

    def _resume(self, cause: str) -> None:
        self.state = RunState.RUNNING
        self._pause_epoch += 1
        self.dispatch_open.set()
        self.dispatching = not self.stop.is_set()
        self._events.emit(RunEventType.RUN_RESUMED, {"cause": cause})

    def _cancel(self, reason: str) -> None:
        self.state = RunState.CANCELLING
        self._pause_epoch += 1
        self._events.emit(RunEventType.RUN_CANCELLING, {"reason": reason})
        self.request_stop(StopReason.CANCELLED)
        self.cancel_in_flight(reason)

    def _change_concurrency(self, command: ChangeConcurrency) -> CommandResult:
        policy = self._policies.concurrency
        allowed = (policy.min, policy.max)
        if not policy.min <= command.target <= policy.max:
            return CommandResult(
                command.command_id,
                False,
                CommandCode.CONCURRENCY_OUT_OF_RANGE,
                f"target must lie within [{policy.min}, {policy.max}]",
                allowed,
            )
        previous = self._target
        self._target = command.target
        effective = self._effective(command.target)
        self.gate.resize(effective)
        self._events.emit(
            RunEventType.CONCURRENCY_CHANGED,
            {"previousTarget": previous, "target": command.target, "effective": effective},
        )
        return CommandResult(command.command_id, True, CommandCode.ACCEPTED, allowed_range=allowed)

    def _effective(self, target: int) -> int:
        return max(1, min([target, *self._caps]))

    async def _pause_watch(self, epoch: int, seconds: float) -> None:
        await self._clock.sleep(seconds)
        if self.state is not RunState.PAUSED or self._pause_epoch != epoch or self.finishing:
            return
        if self._policies.pause.on_pause_timeout is PauseTimeoutAction.RESUME:
            self._resume("PAUSE_TIMEOUT")
        else:
            self._cancel("maxPauseDuration exceeded")
