"""The Run state machine: which transitions exist and which commands each state accepts.

PENDING → LEASED → RUNNING ⇄ PAUSED; PENDING/RUNNING/PAUSED → CANCELLING → CANCELLED; RUNNING →
SUCCEEDED, PARTIAL or FAILED; LEASED/RUNNING/PAUSED/CANCELLING → LOST → RECOVERING → PENDING or a terminal
state. The Service owns every transition; the engine never turns LOST into RECOVERING.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from ._errors import RunStateConflict


class RunState(StrEnum):
    PENDING = "PENDING"
    LEASED = "LEASED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    SUCCEEDED = "SUCCEEDED"
    PARTIAL = "PARTIAL"
    FAILED = "FAILED"
    LOST = "LOST"
    RECOVERING = "RECOVERING"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES


class RunCommandType(StrEnum):
    PAUSE = "PAUSE"
    RESUME = "RESUME"
    CANCEL = "CANCEL"
    CHANGE_CONCURRENCY = "CHANGE_CONCURRENCY"


TERMINAL_RUN_STATES: frozenset[RunState] = frozenset(
    {RunState.CANCELLED, RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED}
)

_S = RunState
_TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    # A cancelled PENDING run goes through CANCELLING too: its recipients are recorded UNSENT in batches
    # after the request, however large the audience, before it ends CANCELLED.
    _S.PENDING: frozenset({_S.LEASED, _S.CANCELLING}),
    _S.LEASED: frozenset({_S.RUNNING, _S.LOST}),
    _S.RUNNING: frozenset({_S.PAUSED, _S.CANCELLING, _S.SUCCEEDED, _S.PARTIAL, _S.FAILED, _S.LOST}),
    _S.PAUSED: frozenset({_S.RUNNING, _S.CANCELLING, _S.LOST}),
    _S.CANCELLING: frozenset({_S.CANCELLED, _S.LOST}),
    _S.LOST: frozenset({_S.RECOVERING}),
    _S.RECOVERING: frozenset({_S.PENDING, _S.CANCELLED, _S.SUCCEEDED, _S.PARTIAL, _S.FAILED}),
    _S.CANCELLED: frozenset(),
    _S.SUCCEEDED: frozenset(),
    _S.PARTIAL: frozenset(),
    _S.FAILED: frozenset(),
}

# Ordered as the API lists them in ``allowedCommands``.
_COMMANDS: Mapping[RunState, tuple[RunCommandType, ...]] = {
    _S.PENDING: (RunCommandType.CANCEL,),
    # Claimed, not started yet (moments for the embedded agent): a cancel waits for the agent, which
    # delivers it as soon as its engine runs, so "start, then cancel at once" is never refused.
    _S.LEASED: (RunCommandType.CANCEL,),
    _S.RUNNING: (RunCommandType.PAUSE, RunCommandType.CANCEL, RunCommandType.CHANGE_CONCURRENCY),
    _S.PAUSED: (RunCommandType.RESUME, RunCommandType.CANCEL, RunCommandType.CHANGE_CONCURRENCY),
}


def allowed_transitions(state: RunState) -> frozenset[RunState]:
    return _TRANSITIONS[state]


def can_transition(current: RunState, target: RunState) -> bool:
    return target in _TRANSITIONS[current]


def sources_of(target: RunState) -> frozenset[RunState]:
    """Every state from which ``target`` may be entered (the ``state IN (...)`` of a conditional update)."""
    return frozenset(state for state, targets in _TRANSITIONS.items() if target in targets)


def allowed_commands(state: RunState) -> tuple[RunCommandType, ...]:
    return _COMMANDS.get(state, ())


def check_command(run_id: str, state: RunState, command: RunCommandType) -> RunState | None:
    """The state a legal ``command`` moves a run in ``state`` to; ``None`` when it keeps the state.

    Raises :class:`RunStateConflict` (naming the current state) when the command is not allowed.
    """
    if command not in allowed_commands(state):
        raise RunStateConflict(run_id, state, command.value.lower(), allowed_commands(state))
    if command is RunCommandType.PAUSE:
        return RunState.PAUSED
    if command is RunCommandType.RESUME:
        return RunState.RUNNING
    if command is RunCommandType.CANCEL:
        # Every cancel goes through CANCELLING: the agent drains first, or for a PENDING run the Service
        # records its recipients UNSENT before it is CANCELLED.
        return RunState.CANCELLING
    return None


def check_transition(run_id: str, current: RunState, target: RunState) -> None:
    if not can_transition(current, target):
        raise RunStateConflict(run_id, current, f"move to {target.value}", allowed_commands(current))
