"""Execution policies and their internal-consistency rules."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from ._enums import ErrorCategory, PauseTimeoutAction

__all__ = [
    "NEVER_RETRIED",
    "ConcurrencyPolicy",
    "ExecutionPolicies",
    "PausePolicy",
    "PolicyViolation",
    "RateLimitPolicy",
    "ResultPolicy",
    "RetryPolicy",
    "TimeoutPolicy",
]

# Categories the seed forbids retrying per item, whatever a policy says.
NEVER_RETRIED: frozenset[ErrorCategory] = frozenset(
    {
        ErrorCategory.AUTHENTICATION,
        ErrorCategory.AUTHORIZATION,
        ErrorCategory.INVALID_REQUEST,
        ErrorCategory.RECIPIENT_INVALID,
        ErrorCategory.PERMANENT_REMOTE,
        ErrorCategory.CANCELLED,
    }
)

#: Backoff grows at most a billionfold over the initial delay (and its logarithm, checked before the power).
_MAX_FACTOR = 1e9
_MAX_GROWTH = math.log(_MAX_FACTOR)
#: Below timedelta.max by a day: its seconds as a float round up past what timedelta accepts.
_MAX_SECONDS = (timedelta.max - timedelta(days=1)).total_seconds()
_DEFAULT_RETRY_ON: frozenset[ErrorCategory] = frozenset(
    {
        ErrorCategory.RATE_LIMITED,
        ErrorCategory.TEMPORARY_REMOTE,
        ErrorCategory.NETWORK,
        ErrorCategory.TIMEOUT,
    }
)


@dataclass(frozen=True, slots=True)
class PolicyViolation:
    """One inconsistency, addressed by a dotted path such as ``concurrency.target``."""

    path: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class ConcurrencyPolicy:
    """Allowed range of in-flight sends; ``ChangeConcurrency`` may move ``target`` within [min, max]."""

    min: int = 1
    max: int = 32
    target: int = 8


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    """Token bucket; ``permits_per_second=None`` means unlimited."""

    permits_per_second: float | None = None
    burst: int = 1


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``delay = min(max_delay, initial_delay * multiplier**(attempt-1)) + uniform(0, jitter)``.

    ``retry_on`` lists the categories eligible for another attempt. TIMEOUT is additionally retried only
    when the provider declares it safe; categories in ``NEVER_RETRIED`` are never eligible.
    """

    max_attempts: int = 3
    initial_delay: timedelta = timedelta(seconds=1)
    max_delay: timedelta = timedelta(seconds=30)
    multiplier: float = 2.0
    jitter: timedelta = timedelta(milliseconds=100)
    retry_on: frozenset[ErrorCategory] = _DEFAULT_RETRY_ON

    def backoff(self, attempt: int) -> timedelta:
        """Delay before the attempt after ``attempt`` (1-based), without jitter."""
        exponent = max(0, attempt - 1)
        # Clamped in logarithms, so neither a large multiplier nor a large attempt count overflows the
        # float, and compared in seconds, so a delay past max_delay need not fit in a timedelta.
        growth = exponent * math.log(self.multiplier) if self.multiplier > 1 else 0.0
        factor = self.multiplier**exponent if growth <= _MAX_GROWTH else _MAX_FACTOR
        raw = self.initial_delay.total_seconds() * factor
        if raw >= min(self.max_delay.total_seconds(), _MAX_SECONDS):
            return self.max_delay
        return timedelta(seconds=raw)

    def worst_case_total_delay(self) -> timedelta:
        """The sum of every backoff and jitter; ``timedelta.max`` when that exceeds what it can hold."""
        seconds = sum(
            self.backoff(attempt).total_seconds() + self.jitter.total_seconds()
            for attempt in range(1, self.max_attempts)
        )
        # Never below zero: a negative delay comes only from a multiplier or delay validation refuses.
        return timedelta.max if seconds >= _MAX_SECONDS else timedelta(seconds=max(seconds, 0.0))


@dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """``item`` bounds all attempts of one item, ``run`` the whole run; ``connect``, when set, caps the
    connect timeout of the account's provider (unset, the account's own applies)."""

    item: timedelta | None = timedelta(minutes=2)
    run: timedelta | None = None
    connect: timedelta | None = None


@dataclass(frozen=True, slots=True)
class ResultPolicy:
    """Response bodies are kept only on request, and then truncated to ``response_body_max_bytes``."""

    save_response_body: bool = False
    response_body_max_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class PausePolicy:
    """A paused run must not hold non-renewable resources forever."""

    max_pause_duration: timedelta | None = timedelta(hours=24)
    on_pause_timeout: PauseTimeoutAction = PauseTimeoutAction.CANCEL


@dataclass(frozen=True, slots=True)
class ExecutionPolicies:
    concurrency: ConcurrencyPolicy = field(default_factory=ConcurrencyPolicy)
    rate_limit: RateLimitPolicy = field(default_factory=RateLimitPolicy)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout: TimeoutPolicy = field(default_factory=TimeoutPolicy)
    result: ResultPolicy = field(default_factory=ResultPolicy)
    pause: PausePolicy = field(default_factory=PausePolicy)

    @classmethod
    def defaults(cls) -> ExecutionPolicies:
        return cls()

    def validate(self) -> list[PolicyViolation]:
        """Every internal inconsistency, not just the first, so a user can fix them in one go."""
        out: list[PolicyViolation] = []
        _check_concurrency(self.concurrency, out)
        _check_rate_limit(self.rate_limit, out)
        _check_retry(self.retry, out)
        _check_timeouts(self.timeout, self.retry, out)
        if self.result.response_body_max_bytes < 0:
            out.append(_v("result.responseBodyMaxBytes", "NEGATIVE", "must be zero or more"))
        if self.pause.max_pause_duration is not None and self.pause.max_pause_duration <= timedelta(0):
            out.append(_v("pause.maxPauseDuration", "NOT_POSITIVE", "must be positive when set"))
        return out


def _v(path: str, code: str, message: str) -> PolicyViolation:
    return PolicyViolation(path, code, message)


def _check_concurrency(policy: ConcurrencyPolicy, out: list[PolicyViolation]) -> None:
    if policy.min < 1:
        out.append(_v("concurrency.min", "OUT_OF_RANGE", "must be at least 1"))
    if policy.min > policy.max:
        out.append(_v("concurrency.max", "OUT_OF_RANGE", "must be at least concurrency.min"))
    if not policy.min <= policy.target <= policy.max:
        out.append(_v("concurrency.target", "OUT_OF_RANGE", "must lie within [min, max]"))


def _check_rate_limit(policy: RateLimitPolicy, out: list[PolicyViolation]) -> None:
    if policy.permits_per_second is not None and not policy.permits_per_second > 0:
        out.append(_v("rateLimit.permitsPerSecond", "NOT_POSITIVE", "must be positive when set"))
    if policy.burst < 1:
        out.append(_v("rateLimit.burst", "OUT_OF_RANGE", "must be at least 1"))


def _check_retry(policy: RetryPolicy, out: list[PolicyViolation]) -> None:
    if policy.max_attempts < 1:
        out.append(_v("retry.maxAttempts", "OUT_OF_RANGE", "must be at least 1"))
    if policy.initial_delay < timedelta(0):
        out.append(_v("retry.initialDelay", "NEGATIVE", "must not be negative"))
    if policy.max_delay < policy.initial_delay:
        out.append(_v("retry.maxDelay", "OUT_OF_RANGE", "must be at least retry.initialDelay"))
    if not policy.multiplier >= 1.0:
        out.append(_v("retry.multiplier", "OUT_OF_RANGE", "must be at least 1"))
    if policy.jitter < timedelta(0):
        out.append(_v("retry.jitter", "NEGATIVE", "must not be negative"))
    forbidden = sorted(policy.retry_on & NEVER_RETRIED)
    if forbidden:
        out.append(
            _v("retry.retryOn", "NOT_RETRYABLE", f"categories are never retried: {', '.join(forbidden)}")
        )


def _check_timeouts(timeouts: TimeoutPolicy, retry: RetryPolicy, out: list[PolicyViolation]) -> None:
    for name, value in (("item", timeouts.item), ("run", timeouts.run), ("connect", timeouts.connect)):
        if value is not None and value <= timedelta(0):
            out.append(_v(f"timeout.{name}", "NOT_POSITIVE", "must be positive when set"))
    if timeouts.item is not None and timeouts.run is not None and timeouts.item > timeouts.run:
        out.append(_v("timeout.item", "EXCEEDS_RUN_TIMEOUT", "must not exceed timeout.run"))
    if retry.max_attempts < 1 or retry.jitter < timedelta(0):
        return
    worst = retry.worst_case_total_delay()
    for name, limit in (("item", timeouts.item), ("run", timeouts.run)):
        if limit is not None and worst >= limit:
            out.append(
                _v(
                    "retry",
                    "EXCEEDS_DEADLINE",
                    f"worst-case retry delay {worst.total_seconds():g}s must be below timeout.{name} "
                    f"{limit.total_seconds():g}s",
                )
            )
