"""Run commands (idempotent by ``command_id``) and their results."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CancelRun",
    "ChangeConcurrency",
    "CommandCode",
    "CommandResult",
    "PauseRun",
    "ResumeRun",
    "RunCommand",
]


@dataclass(frozen=True, slots=True)
class PauseRun:
    command_id: str


@dataclass(frozen=True, slots=True)
class ResumeRun:
    command_id: str


@dataclass(frozen=True, slots=True)
class CancelRun:
    command_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ChangeConcurrency:
    command_id: str
    target: int


RunCommand = PauseRun | ResumeRun | CancelRun | ChangeConcurrency


class CommandCode:
    """Stable result codes carried by ``CommandResult.code``."""

    ACCEPTED = "ACCEPTED"
    RUN_STATE_CONFLICT = "RUN_STATE_CONFLICT"
    CONCURRENCY_OUT_OF_RANGE = "CONCURRENCY_OUT_OF_RANGE"
    COMMAND_ID_CONFLICT = "COMMAND_ID_CONFLICT"


@dataclass(frozen=True, slots=True)
class CommandResult:
    """``allowed_range`` is set when a concurrency target was rejected as out of range."""

    command_id: str
    accepted: bool
    code: str
    message: str = ""
    allowed_range: tuple[int, int] | None = None
