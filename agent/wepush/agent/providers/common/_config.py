"""Configuration parsing pieces whose rules are the same for every channel.

Secret fields hold ``{"$secret": name, "namespace"?, "version"?}`` references,
never values, and durations are ISO-8601; a provider reports every problem at
once as :class:`ConfigError` so a form can mark each field.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from yarl import URL

from wepush.agent.engine import parse_duration
from wepush.agent.providers.spi import SecretRef, ValidationIssue

__all__ = ["DEFAULT_SECRET_NAMESPACE", "ConfigError", "duration_field", "parse_url", "secret_ref"]

#: Namespace used when a ``{"$secret": ...}`` reference does not name one.
DEFAULT_SECRET_NAMESPACE = "default"  # noqa: S105 - a namespace name, not a credential


class ConfigError(ValueError):
    """A configuration failed validation; ``issues`` name every problem (never a secret value)."""

    def __init__(self, issues: list[ValidationIssue] | tuple[ValidationIssue, ...]) -> None:
        super().__init__("; ".join(f"{i.path or '/'}: {i.message}" for i in issues))
        self.issues = tuple(issues)


def secret_ref(node: Any) -> SecretRef | None:
    """The reference in a ``{"$secret": ...}`` node, or ``None`` when the node is absent."""
    if not isinstance(node, Mapping) or not isinstance(node.get("$secret"), str):
        return None
    version = node.get("version")
    return SecretRef(
        namespace=str(node.get("namespace", DEFAULT_SECRET_NAMESPACE)),
        name=str(node["$secret"]),
        version=None if version is None else str(version),
    )


def duration_field(
    raw: Mapping[str, Any], key: str, default: str, issues: list[ValidationIssue]
) -> timedelta:
    """``raw[key]`` (or ``default``) as a positive duration; a bad value is an issue at ``/key``."""
    try:
        value = parse_duration(str(raw.get(key, default)))
    except ValueError:
        issues.append(
            ValidationIssue(f"/{key}", "INVALID_DURATION", "must be an ISO-8601 duration such as PT5S")
        )
        return parse_duration(default)
    if value <= timedelta(0):
        issues.append(ValidationIssue(f"/{key}", "NOT_POSITIVE", "must be longer than zero"))
        return parse_duration(default)
    return value


def parse_url(text: str) -> URL:
    """``URL(text)``, raising ``ValueError`` for every URL that cannot be used, a host whose IDNA label
    does not decode (``https://xn--a.example/``) included: yarl parses that one and fails only when
    ``.host`` is first read, which would otherwise happen outside the caller's ``try``."""
    url = URL(text)
    _ = url.host  # decodes the host now, raising UnicodeError (a ValueError) for a bad label
    return url
