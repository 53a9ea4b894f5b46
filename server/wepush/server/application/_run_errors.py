"""Errors of the Run use cases; each carries the stable code the problem mapper turns into a status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.domain import DomainError


class ConfirmationRequired(DomainError):
    """A real (non dry-run) manual start or a resend came without its confirmation token."""

    code: ClassVar[str] = "CONFIRMATION_REQUIRED"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)


class ConfirmationInvalid(DomainError):
    """The token is forged, expired, or was issued for other resources or versions: confirm again."""

    code: ClassVar[str] = "CONFIRMATION_INVALID"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The confirmation token is not valid any more ({reason}); request a new confirmation."
        )
        self.reason = reason


class EventCursorExpired(DomainError):
    """The requested position is older than the oldest retained event: reload the run detail."""

    code: ClassVar[str] = "CURSOR_EXPIRED"

    def __init__(self, run_id: str, after: int, oldest: int) -> None:
        super().__init__(
            f"Events of run {run_id} after {after} were purged (oldest retained is {oldest}); "
            "reload the run detail instead."
        )
        self.run_id = run_id
        self.after = after
        self.oldest = oldest


class ConcurrencyOutOfRange(ValidationFailed):
    """A concurrency value outside the run's (or job's) range; ``allowed_range`` is rendered."""

    def __init__(self, field: str, value: int, allowed: tuple[int, int]) -> None:
        low, high = allowed
        super().__init__(
            f"Concurrency {value} is outside the allowed range {low}..{high}.",
            [FieldIssue(field, "OUT_OF_RANGE", f"must be between {low} and {high}")],
        )
        self.allowed_range = allowed


class InvalidPolicyOverrides(ValidationFailed):
    def __init__(self, detail: str, issues: Sequence[FieldIssue]) -> None:
        super().__init__(detail, issues)
