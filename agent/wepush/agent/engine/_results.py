"""Provider results, item results (the JSONL artifact line), run summaries and counts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ._durations import format_instant
from ._enums import ErrorCategory, ItemState, RunState
from ._recipients import RecipientValue
from ._redact import redact_diagnostic

__all__ = [
    "DEFAULT_RETRYABLE",
    "ArtifactRef",
    "Counts",
    "ExecutionError",
    "ItemResult",
    "ProviderResult",
    "RunSummary",
]

json_line = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""Compact JSON text as the artifact lines use it (one encoder, instead of one per ``json.dumps`` call)."""

# The provider's default retry hint per category; the engine's RetryPolicy has the final word.
DEFAULT_RETRYABLE: frozenset[ErrorCategory] = frozenset(
    {ErrorCategory.RATE_LIMITED, ErrorCategory.TEMPORARY_REMOTE, ErrorCategory.NETWORK, ErrorCategory.TIMEOUT}
)


@dataclass(frozen=True, slots=True)
class ProviderResult:
    """What a provider reports for one send attempt. ``diagnostic`` is redacted and capped on creation."""

    success: bool
    provider_code: str | None = None
    category: ErrorCategory | None = None
    retryable: bool = False
    retry_after: timedelta | None = None
    diagnostic: str | None = None
    external_request_id: str | None = None
    response_body: str | None = None
    response_truncated: bool = False

    def __post_init__(self) -> None:
        if self.success and self.category is not None:
            raise ValueError("a successful result has no error category")
        if not self.success and self.category is None:
            raise ValueError("a failed result needs an error category")
        object.__setattr__(self, "diagnostic", redact_diagnostic(self.diagnostic))

    @classmethod
    def ok(
        cls,
        provider_code: str | None = "OK",
        *,
        external_request_id: str | None = None,
        response_body: str | None = None,
        response_truncated: bool = False,
        diagnostic: str | None = None,
    ) -> ProviderResult:
        return cls(
            success=True,
            provider_code=provider_code,
            external_request_id=external_request_id,
            response_body=response_body,
            response_truncated=response_truncated,
            diagnostic=diagnostic,
        )

    @classmethod
    def failure(
        cls,
        category: ErrorCategory,
        code: str | None,
        diagnostic: str | None = None,
        retry_after: timedelta | None = None,
        retryable: bool | None = None,
        *,
        external_request_id: str | None = None,
        response_body: str | None = None,
        response_truncated: bool = False,
    ) -> ProviderResult:
        return cls(
            success=False,
            provider_code=code,
            category=category,
            retryable=category in DEFAULT_RETRYABLE if retryable is None else retryable,
            retry_after=retry_after,
            diagnostic=diagnostic,
            external_request_id=external_request_id,
            response_body=response_body,
            response_truncated=response_truncated,
        )


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The final outcome of one recipient item; one JSON line in the result artifacts."""

    run_id: str
    item_id: str
    sequence: int
    state: ItemState
    attempt: int
    error_category: ErrorCategory | None = None
    provider_code: str | None = None
    diagnostic: str | None = None
    external_request_id: str | None = None
    response_body: str | None = None
    response_truncated: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    recipient: Mapping[str, RecipientValue] | None = None

    @property
    def key(self) -> tuple[str, int]:
        """Sinks deduplicate on (itemId, attempt)."""
        return (self.item_id, self.attempt)

    @property
    def latency_ms(self) -> int | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0, round((self.finished_at - self.started_at).total_seconds() * 1000))

    def to_json_dict(self) -> dict[str, Any]:
        """The ``item-result`` contract, camelCase, with ``None`` for absent optional values."""
        return {
            "runId": self.run_id,
            "itemId": self.item_id,
            "sequence": self.sequence,
            "state": self.state.value,
            "attempt": self.attempt,
            "errorCategory": None if self.error_category is None else self.error_category.value,
            "providerCode": self.provider_code,
            "diagnostic": self.diagnostic,
            "externalRequestId": self.external_request_id,
            "responseBody": self.response_body,
            "responseTruncated": self.response_truncated,
            "startedAt": None if self.started_at is None else format_instant(self.started_at),
            "finishedAt": None if self.finished_at is None else format_instant(self.finished_at),
            "latencyMs": self.latency_ms,
            "recipient": None
            if self.recipient is None
            else {name: value.plain() for name, value in self.recipient.items()},
        }

    def to_json_line(self) -> str:
        """One compact JSON line without the trailing newline."""
        return json_line(self.to_json_dict())


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """A file produced by a run, e.g. ``failed.jsonl``."""

    name: str
    kind: str
    uri: str
    media_type: str
    size_bytes: int
    record_count: int


@dataclass(frozen=True, slots=True)
class ExecutionError:
    """A non-fatal error collected during shutdown; the message is redacted and capped."""

    stage: str
    code: str
    message: str

    @classmethod
    def from_exception(cls, stage: str, code: str, exc: BaseException) -> ExecutionError:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return cls(stage, code, redact_diagnostic(text, limit=512) or "")


@dataclass(frozen=True, slots=True)
class Counts:
    """Live counters. ``pending`` and ``in_flight`` are zero once the run has ended."""

    total: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    unsent: int = 0
    skipped: int = 0
    in_flight: int = 0
    pending: int = 0
    retried: int = 0

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.unknown + self.unsent + self.skipped

    def to_json_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "unknown": self.unknown,
            "unsent": self.unsent,
            "skipped": self.skipped,
            "inFlight": self.in_flight,
            "pending": self.pending,
            "retried": self.retried,
        }


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Final account of a run. Construction fails if the count identity does not hold."""

    run_id: str
    final_state: RunState
    total: int
    succeeded: int
    failed: int
    unknown: int
    unsent: int
    skipped: int
    retried: int
    started_at: datetime
    ended_at: datetime
    artifacts: tuple[ArtifactRef, ...] = ()
    suppressed_errors: tuple[ExecutionError, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.counts_consistent:
            raise ValueError(
                f"run {self.run_id}: total {self.total} != succeeded+failed+unknown+unsent+skipped "
                f"({self.succeeded}+{self.failed}+{self.unknown}+{self.unsent}+{self.skipped})"
            )

    @property
    def counts_consistent(self) -> bool:
        return self.total == self.succeeded + self.failed + self.unknown + self.unsent + self.skipped

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "finalState": self.final_state.value,
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "unknown": self.unknown,
            "unsent": self.unsent,
            "skipped": self.skipped,
            "retried": self.retried,
            "startedAt": format_instant(self.started_at),
            "endedAt": format_instant(self.ended_at),
            "artifacts": [
                {
                    "name": a.name,
                    "kind": a.kind,
                    "uri": a.uri,
                    "mediaType": a.media_type,
                    "sizeBytes": a.size_bytes,
                    "recordCount": a.record_count,
                }
                for a in self.artifacts
            ],
            "suppressedErrors": [
                {"stage": e.stage, "code": e.code, "message": e.message} for e in self.suppressed_errors
            ],
        }
