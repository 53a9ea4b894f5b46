"""Static checks a provider must pass before the catalog accepts it.

They look only at the descriptor and its schemas, never at the network, so a
catalog can run them at start-up for every provider. The contract suite reuses
them and adds behavioural checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from wepush.agent.providers.spi import SPI_VERSION, ProviderDescriptor

__all__ = [
    "PROVIDER_ID_PATTERN",
    "SCHEMA_NAMES",
    "descriptor_problems",
    "destination_field_problems",
    "secret_field_problems",
    "walk_properties",
]

#: ``vendor.channel`` style: lower case, at least one dot, segments after the first may use ``-``.
PROVIDER_ID_PATTERN = re.compile(r"^[a-z][a-z0-9]*(\.[a-z][a-z0-9-]*)+$")
SCHEMA_NAMES = ("account", "message", "recipient", "ui")

# Property names that hold credentials in practice; such a field must be marked secret.
_SECRET_NAME = re.compile(
    r"(?i)^(?:.*(?:password|passwd|secret|token|credential|private[-_]?key|api[-_]?key|access[-_]?key)).*$"
)


# Account members that usually decide where a connection goes (and so where its secrets are sent).
_DESTINATION_NAME = re.compile(r"(?i)^(?:.*(?:url|uri|endpoint|cidrs?)|host|hostname|server|port)$")


def walk_properties(schema: Any, pointer: str = "") -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """Yield ``(pointer, property name, property schema)`` for every declared property, depth first.

    Follows ``properties``, ``items``, ``additionalProperties``, the ``allOf/anyOf/oneOf``
    branches and local ``$defs``/``definitions`` so nested secret fields are found.
    """
    if not isinstance(schema, Mapping):
        return
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, Mapping):
            yield f"{pointer}/{name}", name, sub
            yield from walk_properties(sub, f"{pointer}/{name}")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from walk_properties(sub, f"{pointer}/{key}")
    for key in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(schema.get(key) or ()):
            yield from walk_properties(sub, f"{pointer}/{key}/{index}")
    for key in ("then", "else"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from walk_properties(sub, f"{pointer}/{key}")


def _is_secret_reference(schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """A property whose value is a ``{"$secret": ...}`` reference (directly or through a local ``$ref``)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            schema = target
    required = schema.get("required") or ()
    return "$secret" in required or "$secret" in (schema.get("properties") or {})


def secret_field_problems(schema: Mapping[str, Any], schema_name: str) -> list[str]:
    """Credential-looking or secret-reference fields must carry ``x-wepush-secret`` and no default."""
    problems: list[str] = []
    for pointer, name, prop in walk_properties(schema):
        marked = prop.get("x-wepush-secret") is True
        if not marked and (_is_secret_reference(prop, schema) or _SECRET_NAME.match(name)):
            problems.append(f"{schema_name}{pointer} looks like a credential but lacks x-wepush-secret")
        if marked:
            leaked = [key for key in ("default", "examples", "const", "enum") if key in prop]
            if leaked:
                problems.append(f"{schema_name}{pointer} is secret but declares {', '.join(leaked)}")
    return problems


def destination_field_problems(schema: Mapping[str, Any], schema_name: str) -> list[str]:
    """Destination-looking account members must say so with ``x-wepush-destination``.

    The Service makes an update that changes such a member send the account's secrets again (REPLACE,
    never KEEP), so pointing an account at another server cannot hand it the stored secrets; an
    unmarked destination would slip past that rule.
    """
    return [
        f"{schema_name}{pointer} looks like a destination but lacks x-wepush-destination"
        for pointer, name, prop in walk_properties(schema)
        if _DESTINATION_NAME.match(name)
        and prop.get("x-wepush-destination") is not True
        and prop.get("x-wepush-secret") is not True
    ]


#: The longest text the public API carries for each descriptor field (the Service's contract): a longer
#: one would make every catalog response fail its own contract.
_TEXT_LIMITS: Final = (
    ("provider id", "provider_id", 128),
    ("display name", "display_name", 200),
    ("category", "category", 64),
    ("description", "description", 2000),
    ("icon", "icon", 512),
    ("version", "version", 64),
    ("SPI version", "spi_version", 16),
)
_SHORT_TEXT: Final = 64


def _text_problems(descriptor: ProviderDescriptor) -> Iterator[str]:
    for label, attribute, limit in _TEXT_LIMITS:
        value = getattr(descriptor, attribute) or ""
        if len(value) > limit:
            yield f"{label} is {len(value)} characters long; at most {limit} are allowed"
    for label, values in (("platform", descriptor.platforms), ("schema version", descriptor.schema_versions)):
        for value in values:
            if len(value) > _SHORT_TEXT:
                yield f"{label} {value[:_SHORT_TEXT]!r}… is longer than {_SHORT_TEXT} characters"


def descriptor_problems(descriptor: ProviderDescriptor) -> list[str]:
    """Every reason the catalog must refuse this descriptor; empty when acceptable."""
    problems: list[str] = list(_text_problems(descriptor))
    if not PROVIDER_ID_PATTERN.match(descriptor.provider_id):
        problems.append(
            f"provider id {descriptor.provider_id!r} is not of the form 'vendor.channel' "
            "(lower case letters, digits and '-', at least one '.')"
        )
    if descriptor.spi_major != SPI_VERSION:
        problems.append(f"SPI {descriptor.spi_version} is incompatible with this agent's SPI {SPI_VERSION}")
    if not descriptor.schema_versions:
        problems.append("no schema version is declared")
    for name in SCHEMA_NAMES:
        schema = getattr(descriptor.schemas, name)
        if not schema:
            problems.append(f"{name} schema is missing")
            continue
        try:
            Draft202012Validator.check_schema(dict(schema))
        except SchemaError as exc:
            problems.append(f"{name} schema is not a valid JSON Schema: {exc.message[:200]}")
            continue
        if name != "ui":
            problems.extend(secret_field_problems(schema, name))
        if name == "account":
            problems.extend(destination_field_problems(schema, name))
    return problems
