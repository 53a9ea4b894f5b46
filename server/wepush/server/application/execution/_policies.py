"""Execution policies: the JSON shape of ``execution-policies.schema.json`` ↔ the engine's ExecutionPolicies.

A Run snapshot stores the complete JSON form (every default filled in), so a run never depends on defaults
that change later. Two shapes differ on purpose: the contract's ``retry.jitter`` is a fraction of the
computed delay, the engine's is an absolute bound; the engine receives ``jitter × initialDelay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, ClassVar

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ErrorCategory,
    ExecutionPolicies,
    PausePolicy,
    PauseTimeoutAction,
    RateLimitPolicy,
    ResultPolicy,
    RetryPolicy,
    TimeoutPolicy,
    format_duration,
    parse_duration,
)
from wepush.server.domain import DomainError, JsonObject

__all__ = [
    "InvalidPolicies",
    "merge_policies",
    "normalize_policies",
    "policies_from_json",
    "policies_to_json",
]

# TIMEOUT is in, as in the engine: it is retried only for providers that declare it safe (a vendor that
# drops repeats, such as WeChat by client_msg_id), so the default costs no duplicate anywhere else.
_DEFAULT_RETRY_ON = ("RATE_LIMITED", "TEMPORARY_REMOTE", "NETWORK", "TIMEOUT")


class InvalidPolicies(DomainError):
    """The policies document is malformed or internally inconsistent; ``problems`` names each issue."""

    code: ClassVar[str] = "VALIDATION_FAILED"

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        super().__init__("execution policies are invalid: " + "; ".join(f"{p}: {m}" for p, _, m in problems))
        self.problems = problems


def _section(doc: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = doc.get(name) or {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be an object")
    return value


def _duration(section: Mapping[str, Any], key: str, default: str | None, where: str) -> timedelta | None:
    """``section[key]`` as a duration; one that cannot be read is named by its own path (``timeout.item``)."""
    raw = section.get(key, default)
    if raw is None:
        return None
    try:
        return parse_duration(str(raw))
    except ValueError as exc:
        raise InvalidPolicies([(f"{where}.{key}", "MALFORMED", str(exc))]) from None


def policies_from_json(doc: Mapping[str, Any]) -> ExecutionPolicies:
    """Parse the contract shape (absent members take the schema defaults). Raises :class:`InvalidPolicies`."""
    try:
        concurrency = _section(doc, "concurrency")
        rate = _section(doc, "rateLimit")
        retry = _section(doc, "retry")
        timeout = _section(doc, "timeout")
        result = _section(doc, "result")
        pause = _section(doc, "pause")
        base = ConcurrencyPolicy()
        initial = _duration(retry, "initialDelay", "PT1S", "retry") or timedelta(0)
        jitter = float(retry.get("jitter", 0.2))
        if not 0.0 <= jitter <= 1.0:
            # A fraction of the delay; outside [0, 1] it is a mistake, and a huge one would not even fit
            # in a timedelta.
            raise InvalidPolicies([("retry.jitter", "OUT_OF_RANGE", "must be between 0 and 1")])
        permits = rate.get("permitsPerSecond")
        policies = ExecutionPolicies(
            concurrency=ConcurrencyPolicy(
                min=int(concurrency.get("min", base.min)),
                max=int(concurrency.get("max", base.max)),
                target=int(concurrency.get("target", base.target)),
            ),
            rate_limit=RateLimitPolicy(
                permits_per_second=None if permits is None else float(permits),
                burst=int(rate.get("burst", 1)),
            ),
            retry=RetryPolicy(
                max_attempts=int(retry.get("maxAttempts", 3)),
                initial_delay=initial,
                max_delay=_duration(retry, "maxDelay", "PT30S", "retry") or timedelta(0),
                multiplier=float(retry.get("multiplier", 2.0)),
                jitter=initial * jitter,
                retry_on=frozenset(ErrorCategory(c) for c in retry.get("retryOn", _DEFAULT_RETRY_ON)),
            ),
            timeout=TimeoutPolicy(
                item=_duration(timeout, "item", "PT30S", "timeout"),
                run=_duration(timeout, "run", None, "timeout"),
                # Unset by default: the account's connectTimeout applies; a job may set a shorter cap.
                connect=_duration(timeout, "connect", None, "timeout"),
            ),
            result=ResultPolicy(
                save_response_body=bool(result.get("saveResponseBody", False)),
                response_body_max_bytes=int(result.get("responseBodyMaxBytes", 4096)),
            ),
            pause=PausePolicy(
                max_pause_duration=_duration(pause, "maxPauseDuration", "PT24H", "pause"),
                on_pause_timeout=PauseTimeoutAction(pause.get("onPauseTimeout", "CANCEL")),
            ),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidPolicies([("", "MALFORMED", str(exc))]) from None
    violations = policies.validate()
    if violations:
        raise InvalidPolicies([(v.path, v.code, v.message) for v in violations])
    return policies


def policies_to_json(policies: ExecutionPolicies) -> JsonObject:
    """The complete contract shape of ``policies`` (the inverse of :func:`policies_from_json`)."""
    retry = policies.retry
    initial = retry.initial_delay.total_seconds()
    jitter = 0.0 if initial <= 0 else min(1.0, retry.jitter.total_seconds() / initial)
    timeout = policies.timeout
    pause = policies.pause
    doc: JsonObject = {
        "concurrency": {
            "min": policies.concurrency.min,
            "max": policies.concurrency.max,
            "target": policies.concurrency.target,
        },
        "rateLimit": {
            "permitsPerSecond": policies.rate_limit.permits_per_second,
            "burst": policies.rate_limit.burst,
        },
        "retry": {
            "maxAttempts": retry.max_attempts,
            "initialDelay": format_duration(retry.initial_delay),
            "maxDelay": format_duration(retry.max_delay),
            "multiplier": retry.multiplier,
            "jitter": round(jitter, 6),
            "retryOn": sorted(c.value for c in retry.retry_on),
        },
        "timeout": {
            "item": None if timeout.item is None else format_duration(timeout.item),
            "run": None if timeout.run is None else format_duration(timeout.run),
            "connect": None if timeout.connect is None else format_duration(timeout.connect),
        },
        "result": {
            "saveResponseBody": policies.result.save_response_body,
            "responseBodyMaxBytes": policies.result.response_body_max_bytes,
        },
        "pause": {
            "onPauseTimeout": pause.on_pause_timeout.value,
        },
    }
    if pause.max_pause_duration is not None:
        doc["pause"]["maxPauseDuration"] = format_duration(pause.max_pause_duration)
    # The contract has no null for these: an absent member means "no limit" to the reader.
    doc["timeout"] = {k: v for k, v in doc["timeout"].items() if v is not None or k == "run"}
    return doc


def merge_policies(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> JsonObject:
    """Deep-merge ``overrides`` (e.g. a run's ``policyOverrides``) over ``base`` (the job's policies)."""
    merged: JsonObject = {
        key: dict(value) if isinstance(value, Mapping) else value for key, value in base.items()
    }
    for key, value in (overrides or {}).items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            current.update(value)
        else:
            merged[key] = dict(value) if isinstance(value, Mapping) else value
    return merged


def normalize_policies(doc: Mapping[str, Any]) -> JsonObject:
    """Validate ``doc`` and return it with every default made explicit (what a snapshot freezes)."""
    return policies_to_json(policies_from_json(doc))
