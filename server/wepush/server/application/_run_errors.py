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


class SecretsReplacedSinceRun(DomainError):
    """A resend sends with its source run's frozen account, secrets included (seed: the new run copies the
    source run's snapshot and reads no current resource); a secret replaced since is gone, so every item
    would fail on it. Said before a token is issued, naming the way that does use the new secret."""

    code: ClassVar[str] = "VERSION_CONFLICT"

    def __init__(self, run_id: str, account_id: str, names: Sequence[str]) -> None:
        listed = ", ".join(repr(name) for name in names)
        super().__init__(
            f"The secret {listed} of account {account_id} was replaced after run {run_id} started; a resend "
            "sends with that run's settings, which the old secret belonged to. Start a new run from the job "
            "to send with the current secret."
        )
        self.run_id = run_id
        self.names = tuple(names)


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
