"""A job's execution policies: the API's request shape in, the complete frozen document stored, the API shape out.

Jobs store the execution-policies document of ``execution-policies.schema.json`` with every default made
explicit (the form a Run snapshot freezes), validated by the engine's own rules. The public API differs in
one member: its ``retry.jitter`` is an absolute duration, the stored one a fraction of the initial delay.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from wepush.agent.engine import format_duration, parse_duration
from wepush.server.application._run_policies import MALFORMED_DURATION
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.execution._policies import InvalidPolicies, normalize_policies
from wepush.server.domain import JsonObject

__all__ = ["policies_for_api", "policies_from_request"]

_BASE: Final = "/policies"
_DEFAULT_INITIAL_DELAY: Final = "PT1S"


def _pointer(dotted: str) -> str:
    return _BASE + "".join("/" + part for part in dotted.split(".") if part)


def _invalid(issues: list[FieldIssue]) -> ValidationFailed:
    return ValidationFailed("The execution policies are invalid or inconsistent.", issues)


def _duration(value: Any, where: str) -> timedelta:
    try:
        return parse_duration(str(value))
    except ValueError:
        raise _invalid([FieldIssue(f"{_BASE}/{where}", "MALFORMED", MALFORMED_DURATION)]) from None


def policies_from_request(requested: Mapping[str, Any] | None) -> JsonObject:
    """Fill the service defaults into the requested policies and validate them; 400 names each field."""
    document: dict[str, Any] = {key: dict(value) for key, value in (requested or {}).items()}
    retry = document.get("retry")
    if retry is not None and "jitter" in retry:
        initial = _duration(retry.get("initialDelay", _DEFAULT_INITIAL_DELAY), "retry/initialDelay")
        jitter = _duration(retry["jitter"], "retry/jitter")
        if jitter > initial:
            raise _invalid(
                [FieldIssue(_BASE + "/retry/jitter", "OUT_OF_RANGE", "must not exceed retry.initialDelay")]
            )
        retry["jitter"] = 0.0 if initial <= timedelta(0) else jitter / initial
    try:
        return normalize_policies(document)
    except InvalidPolicies as error:
        raise _invalid(
            [FieldIssue(_pointer(path), code, message) for path, code, message in error.problems]
        ) from None


def policies_for_api(stored: Mapping[str, Any]) -> JsonObject:
    """The contract's ExecutionPolicies shape of a stored document (absent members mean "no limit")."""
    document: JsonObject = {
        key: {k: v for k, v in value.items() if v is not None}
        for key, value in stored.items()
        if isinstance(value, Mapping)
    }
    retry = document.get("retry")
    if retry is not None and "jitter" in retry:
        initial = parse_duration(str(retry.get("initialDelay", _DEFAULT_INITIAL_DELAY)))
        retry["jitter"] = format_duration(initial * float(retry["jitter"]))
    return document
