"""Stable enumerations shared by the engine, providers, the agent and the server mappers."""

from __future__ import annotations

import enum

__all__ = [
    "ErrorCategory",
    "ItemState",
    "PauseTimeoutAction",
    "RunEventType",
    "RunState",
    "ValidationCategory",
]


class RunState(enum.StrEnum):
    """Run lifecycle. The engine only drives RUNNING, PAUSED, CANCELLING and the terminal states."""

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
        return self in _TERMINAL_RUN_STATES


_TERMINAL_RUN_STATES = frozenset({RunState.CANCELLED, RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED})


class ItemState(enum.StrEnum):
    """Outcome of one recipient item."""

    PENDING = "PENDING"
    IN_FLIGHT = "IN_FLIGHT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    UNSENT = "UNSENT"
    SKIPPED = "SKIPPED"


class ErrorCategory(enum.StrEnum):
    """Provider-independent failure classes; the retry rules are keyed on them."""

    AUTHENTICATION = "AUTHENTICATION"
    AUTHORIZATION = "AUTHORIZATION"
    INVALID_REQUEST = "INVALID_REQUEST"
    RECIPIENT_INVALID = "RECIPIENT_INVALID"
    RATE_LIMITED = "RATE_LIMITED"
    TEMPORARY_REMOTE = "TEMPORARY_REMOTE"
    PERMANENT_REMOTE = "PERMANENT_REMOTE"
    NETWORK = "NETWORK"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    INTERNAL = "INTERNAL"
    UNKNOWN = "UNKNOWN"


class RunEventType(enum.StrEnum):
    """Run event types. The first group is produced by the engine, the second by the Service."""

    RUN_STARTED = "RUN_STARTED"
    PROGRESS = "PROGRESS"
    RUN_PAUSED = "RUN_PAUSED"
    RUN_RESUMED = "RUN_RESUMED"
    RUN_CANCELLING = "RUN_CANCELLING"
    CONCURRENCY_CHANGED = "CONCURRENCY_CHANGED"
    COMMAND_ACKNOWLEDGED = "COMMAND_ACKNOWLEDGED"
    ITEM_ERROR = "ITEM_ERROR"
    RUN_COMPLETED = "RUN_COMPLETED"
    RUN_CREATED = "RUN_CREATED"
    RUN_LEASED = "RUN_LEASED"
    RUN_LOST = "RUN_LOST"
    RUN_RECOVERING = "RUN_RECOVERING"

    @property
    def droppable(self) -> bool:
        """Only progress may be coalesced away; terminal and error events are always delivered."""
        return self is RunEventType.PROGRESS


class ValidationCategory(enum.StrEnum):
    """Why ``ExecutionEngine.start`` refused a run, in the order the checks are made."""

    SPEC_INVALID = "SPEC_INVALID"
    POLICY_INVALID = "POLICY_INVALID"
    PROVIDER_NOT_AVAILABLE = "PROVIDER_NOT_AVAILABLE"
    SCHEMA_VERSION_UNSUPPORTED = "SCHEMA_VERSION_UNSUPPORTED"
    PROVIDER_CONFIG_INVALID = "PROVIDER_CONFIG_INVALID"
    RECIPIENT_SOURCE_UNAVAILABLE = "RECIPIENT_SOURCE_UNAVAILABLE"
    SINK_UNAVAILABLE = "SINK_UNAVAILABLE"
    PROVIDER_SESSION_FAILED = "PROVIDER_SESSION_FAILED"


class PauseTimeoutAction(enum.StrEnum):
    """What a paused run does once ``max_pause_duration`` has elapsed."""

    RESUME = "RESUME"
    CANCEL = "CANCEL"
