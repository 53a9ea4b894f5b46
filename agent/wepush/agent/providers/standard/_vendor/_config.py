"""Parsing provider configuration documents: JSON Schema first, then typed values.

Structure is checked against the packaged schema (every violation reported with a
JSON pointer), then each provider runs its own semantic checks on the parsed dict.
Secret fields hold ``{"$secret": name, "namespace"?, "version"?}`` references,
never values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from wepush.agent.providers.common import (
    ConfigError,
    Draft202012,
    duration_field,
    most_specific,
    secret_ref,
    value_free_rule,
    violation_path,
)
from wepush.agent.providers.spi import ConfigDocument, SecretRef, ValidationIssue

__all__ = ["http_timeouts", "issue", "load_object", "required_secret"]


def issue(path: str, code: str, message: str) -> ValidationIssue:
    return ValidationIssue(path, code, message)


def _pointer(parts: Any) -> str:
    return "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in parts)


def load_object(document: ConfigDocument, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The document as a dict, or :class:`ConfigError` listing every schema violation."""
    try:
        raw = document.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(
            [issue("", "NOT_JSON", f"configuration is not a JSON document: {type(exc).__name__}")]
        ) from None
    validator = Draft202012(dict(schema))
    issues = [
        # Worded without the value: jsonschema quotes it in most messages (a ``type`` error
        # included), and a secret pasted into the wrong field must not come back.
        issue(_pointer(violation_path(err)), f"SCHEMA_{str(err.validator).upper()}", value_free_rule(err))
        for err in sorted(
            map(most_specific, validator.iter_errors(raw)), key=lambda e: list(map(str, e.absolute_path))
        )
    ]
    if issues:
        raise ConfigError(issues)
    if not isinstance(raw, dict):
        raise ConfigError([issue("", "NOT_OBJECT", "must be a JSON object")])
    return raw


def http_timeouts(raw: Mapping[str, Any], issues: list[ValidationIssue]) -> tuple[timedelta, timedelta]:
    """``connectTimeout`` (default 5 s) and ``requestTimeout`` (default 15 s) of a vendor account."""
    return (
        duration_field(raw, "connectTimeout", "PT5S", issues),
        duration_field(raw, "requestTimeout", "PT15S", issues),
    )


def required_secret(raw: Mapping[str, Any], key: str, issues: list[ValidationIssue]) -> SecretRef | None:
    """The secret reference at ``key``; a missing one is a ``REQUIRED`` issue at ``/key``."""
    ref = secret_ref(raw.get(key))
    if ref is None:
        issues.append(issue(f"/{key}", "REQUIRED", "a secret reference is required"))
    return ref
