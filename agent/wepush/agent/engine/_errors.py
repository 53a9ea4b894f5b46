"""Errors the engine raises across its boundary, each with a stable category."""

from __future__ import annotations

from collections.abc import Sequence

from ._enums import ValidationCategory
from ._policies import PolicyViolation
from ._provider import ValidationIssue

__all__ = ["EngineValidationError"]


class EngineValidationError(Exception):
    """``ExecutionEngine.start`` refused the run; the run never entered RUNNING.

    ``violations`` hold ``PolicyViolation`` or provider ``ValidationIssue`` values (both expose
    ``path``, ``code`` and ``message``); ``message`` never contains secret values.
    """

    def __init__(
        self,
        category: ValidationCategory,
        message: str,
        violations: Sequence[PolicyViolation | ValidationIssue] = (),
    ) -> None:
        super().__init__(f"{category.value}: {message}")
        self.category = category
        self.message = message
        self.violations: tuple[PolicyViolation | ValidationIssue, ...] = tuple(violations)
