"""Loading a provider descriptor and its JSON Schemas from package data.

Layout (one provider per package)::

    <package>/provider.json
    <package>/schemas/{account,message,recipient,ui}.schema.json

or, for a package holding several providers, ``<package>/providers/<slug>/`` with the same files.

``provider.json`` keys (camelCase): ``providerId``, ``displayName``, ``version`` (required); ``spiVersion``,
``category``, ``description``, ``icon``, ``capabilities`` (``preview``, ``dryRun``, ``idempotency``,
``responseBody``, ``cancellation``, ``testConnection``, ``safeToRetryOnTimeout``), ``concurrencyLimit``,
``defaultTimeout`` (ISO-8601 duration such as ``PT30S``), ``threadSafety``, ``platforms``,
``schemaVersions``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from wepush.agent.engine import (
    SPI_VERSION,
    ProviderCapabilities,
    ProviderDescriptor,
    ProviderSchemas,
    ThreadSafetyMode,
    parse_duration,
)

__all__ = ["DescriptorError", "load_descriptor_from_package", "parse_descriptor"]

_SCHEMA_NAMES = ("account", "message", "recipient", "ui")
_CAPABILITY_KEYS = {
    "preview": "preview",
    "dryRun": "dry_run",
    "idempotency": "idempotency",
    "responseBody": "response_body",
    "cancellation": "cancellation",
    "testConnection": "test_connection",
    "safeToRetryOnTimeout": "safe_to_retry_on_timeout",
}
_KNOWN_KEYS = frozenset(
    {
        "providerId",
        "displayName",
        "version",
        "spiVersion",
        "category",
        "description",
        "icon",
        "capabilities",
        "concurrencyLimit",
        "defaultTimeout",
        "threadSafety",
        "platforms",
        "schemaVersions",
    }
)


class DescriptorError(ValueError):
    """A provider's packaged descriptor is missing or malformed."""


def load_descriptor_from_package(package: str, slug: str | None = None) -> ProviderDescriptor:
    """Read ``provider.json`` and the four schemas shipped as package data of ``package``."""
    try:
        root: Traversable = resources.files(package)
    except ModuleNotFoundError as exc:
        raise DescriptorError(f"provider package {package!r} cannot be imported") from exc
    if slug is not None:
        root = root.joinpath("providers", slug)
    where = f"{package}" + (f"/providers/{slug}" if slug else "")
    raw = _read_json(root.joinpath("provider.json"), f"{where}/provider.json")
    schemas = {
        name: _read_json(
            root.joinpath("schemas", f"{name}.schema.json"), f"{where}/schemas/{name}.schema.json"
        )
        for name in _SCHEMA_NAMES
    }
    return parse_descriptor(raw, ProviderSchemas(**schemas), source=where)


def parse_descriptor(raw: Any, schemas: ProviderSchemas, *, source: str = "descriptor") -> ProviderDescriptor:
    """Build a descriptor from the parsed ``provider.json``; unknown keys are an error."""
    if not isinstance(raw, dict):
        raise DescriptorError(f"{source}: provider.json must hold a JSON object")
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise DescriptorError(f"{source}: unknown provider.json keys: {', '.join(unknown)}")
    try:
        return ProviderDescriptor(
            provider_id=_text(raw, "providerId", source),
            display_name=_text(raw, "displayName", source),
            version=_text(raw, "version", source),
            spi_version=str(raw.get("spiVersion", SPI_VERSION)),
            category=str(raw.get("category", "other")),
            description=str(raw.get("description", "")),
            icon=None if raw.get("icon") is None else str(raw["icon"]),
            capabilities=_capabilities(raw.get("capabilities", {}), source),
            concurrency_limit=_positive_int_or_none(raw.get("concurrencyLimit"), "concurrencyLimit", source),
            default_timeout=_duration_or_none(raw.get("defaultTimeout")),
            thread_safety=ThreadSafetyMode(raw.get("threadSafety", ThreadSafetyMode.SERIALIZED.value)),
            platforms=tuple(str(p) for p in raw.get("platforms", ["any"])),
            schema_versions=tuple(str(v) for v in raw.get("schemaVersions", ["1"])),
            schemas=schemas,
        )
    except (TypeError, ValueError) as exc:
        if isinstance(exc, DescriptorError):
            raise
        raise DescriptorError(f"{source}: {exc}") from exc


def _read_json(node: Traversable, where: str) -> Any:
    if not node.is_file():
        raise DescriptorError(f"{where} is missing")
    try:
        return json.loads(node.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DescriptorError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc


def _text(raw: dict[str, Any], key: str, source: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise DescriptorError(f"{source}: {key} must be a non-empty string")
    return value


def _capabilities(raw: Any, source: str) -> ProviderCapabilities:
    if not isinstance(raw, dict):
        raise DescriptorError(f"{source}: capabilities must be an object")
    unknown = sorted(set(raw) - set(_CAPABILITY_KEYS))
    if unknown:
        raise DescriptorError(f"{source}: unknown capabilities: {', '.join(unknown)}")
    flags: dict[str, bool] = {}
    for key, value in raw.items():
        if not isinstance(value, bool):
            raise DescriptorError(f"{source}: capabilities.{key} must be a boolean")
        flags[_CAPABILITY_KEYS[key]] = value
    return ProviderCapabilities(**flags)


def _duration_or_none(value: Any) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("defaultTimeout must be an ISO-8601 duration string such as PT30S")
    return parse_duration(value)


def _positive_int_or_none(value: Any, key: str, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DescriptorError(f"{source}: {key} must be a positive integer")
    return value
