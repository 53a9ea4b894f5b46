"""The two spellings of execution policies: the public API's and the frozen snapshot's.

The snapshot stores ``execution-policies.schema.json``: ``retry.jitter`` is a fraction of the computed
delay and "unlimited" is an explicit ``null``. The public API's ExecutionPolicies spells ``retry.jitter`` as
a Duration and leaves unlimited values out. These two functions translate at the boundary of the Run use
cases, so neither shape leaks into the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from wepush.agent.engine import format_duration, parse_duration
from wepush.server.application.execution import InvalidPolicies
from wepush.server.domain import JsonObject

_DEFAULT_INITIAL_DELAY = timedelta(seconds=1)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def api_policies(snapshot_policies: Mapping[str, Any]) -> JsonObject:
    """Snapshot shape → API shape (jitter as the Duration it amounts to for the first retry)."""
    doc: JsonObject = _without_nulls(snapshot_policies)
    retry = doc.get("retry")
    if isinstance(retry, dict) and isinstance(retry.get("jitter"), (int, float)):
        initial = parse_duration(str(retry.get("initialDelay", "PT1S")))
        retry["jitter"] = format_duration(initial * float(retry["jitter"]))
    return doc


#: Why a policy duration was refused, without the value (a problem never echoes what was submitted).
MALFORMED_DURATION = "must be an ISO-8601 day-time duration a timer can hold, such as PT30S or P1D"


def _duration(text: str, where: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError:
        # The contract's pattern admits durations longer than a timedelta holds (P99999999999999D).
        raise InvalidPolicies([(where, "MALFORMED", MALFORMED_DURATION)]) from None


def spec_overrides(overrides: Mapping[str, Any] | None, base: Mapping[str, Any]) -> JsonObject | None:
    """API-shaped ``policyOverrides`` → snapshot shape. A Duration jitter becomes its fraction of the
    effective initial delay (from the overrides, else from ``base``, the job's policies). A duration that
    cannot be read raises :class:`InvalidPolicies` naming it (``retry.initialDelay``)."""
    if overrides is None:
        return None
    doc: JsonObject = {k: dict(v) if isinstance(v, Mapping) else v for k, v in overrides.items()}
    retry = doc.get("retry")
    if isinstance(retry, dict) and isinstance(retry.get("jitter"), str):
        base_retry = base.get("retry") if isinstance(base.get("retry"), Mapping) else {}
        initial_text = retry.get("initialDelay") or (base_retry or {}).get("initialDelay")
        initial = (
            _duration(str(initial_text), "retry.initialDelay") if initial_text else _DEFAULT_INITIAL_DELAY
        )
        jitter = _duration(retry["jitter"], "retry.jitter")
        seconds = initial.total_seconds()
        retry["jitter"] = 0.0 if seconds <= 0 else min(1.0, jitter.total_seconds() / seconds)
    return doc
