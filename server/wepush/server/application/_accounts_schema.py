"""The Service's authoritative JSON-Schema check of an account ``config``, and its secret references.

The UI validates first for quick feedback, but only this check decides what is saved (seed: "UI 校验结果不能
替代 Service 校验"). Every schema violation becomes one :class:`FieldIssue` whose ``field`` is a JSON pointer
under ``/config``, so a form can point at the exact input. ``format`` stays an annotation (the 2020-12
default), exactly as in the providers' own parsing, so the Service never refuses what a provider accepts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from wepush.agent.providers.common._schema_rules import (
    most_specific,
    value_free_rule,
    violation_path,
    with_ecma_pattern,
)
from wepush.server.application.errors import FieldIssue

__all__ = ["MAX_SCHEMA_ISSUES", "SECRET_REF_KEY", "SchemaValidators", "json_pointer", "secret_references"]

SECRET_REF_KEY: Final = "$secret"  # noqa: S105 - a JSON key, not a credential
MAX_SCHEMA_ISSUES: Final = 100
_MESSAGE_CHARS: Final = 300

#: JSON-Schema keyword → the stable field-level code clients branch on.
_CODES: Final[Mapping[str, str]] = {
    "required": "REQUIRED",
    "additionalProperties": "UNKNOWN_FIELD",
    "unevaluatedProperties": "UNKNOWN_FIELD",
    "type": "INVALID_TYPE",
    "enum": "NOT_ALLOWED",
    "const": "NOT_ALLOWED",
    "pattern": "PATTERN_MISMATCH",
    "format": "INVALID_FORMAT",
    "minLength": "TOO_SHORT",
    "maxLength": "TOO_LONG",
    "minItems": "TOO_FEW_ITEMS",
    "maxItems": "TOO_MANY_ITEMS",
    "uniqueItems": "DUPLICATE_ITEMS",
    "minProperties": "TOO_FEW_FIELDS",
    "maxProperties": "TOO_MANY_FIELDS",
    "minimum": "OUT_OF_RANGE",
    "maximum": "OUT_OF_RANGE",
    "exclusiveMinimum": "OUT_OF_RANGE",
    "exclusiveMaximum": "OUT_OF_RANGE",
    "multipleOf": "OUT_OF_RANGE",
}


def json_pointer(parts: Any) -> str:
    """RFC 6901 pointer of a path (``["auth", "token"]`` → ``/auth/token``)."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _issues_of(error: ValidationError, base: str) -> Iterator[FieldIssue]:
    where = base + json_pointer(error.absolute_path)
    keyword = str(error.validator)
    code = _CODES.get(keyword, "INVALID")
    if keyword == "required":
        # Name the missing property itself, not the object that lacks it.
        yield FieldIssue(base + json_pointer(violation_path(error)), code, "is required")
        return
    if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        declared = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        patterns = error.schema.get("patternProperties", {}) if isinstance(error.schema, Mapping) else {}
        extras = [
            key
            for key in error.instance
            if key not in declared and not any(re.search(p, key) for p in patterns)
        ]
        for key in extras or [""]:
            yield FieldIssue(where + json_pointer([key]) if key else where, code, "is not a known field")
        return
    # Never jsonschema's message: it quotes the value, which may be a secret typed into the wrong field.
    yield FieldIssue(where, code, value_free_rule(error)[:_MESSAGE_CHARS])


class SchemaValidators:
    """One compiled validator per (provider, schema kind), built on first use and then shared.

    The draft is the one the schema declares in ``$schema`` (Draft 2020-12 when it declares none).
    """

    def __init__(self) -> None:
        # Keyed by provider id: one service instance serves one catalog for its whole life.
        self._cache: dict[str, Validator] = {}

    def _validator(self, key: str, schema: Mapping[str, Any]) -> Validator:
        found = self._cache.get(key)
        if found is None:
            document = dict(schema)
            cls = with_ecma_pattern(validator_for(document, default=Draft202012Validator))
            found = cls(document)
            self._cache[key] = found
        return found

    def issues(self, key: str, schema: Mapping[str, Any], instance: Any, *, base: str) -> list[FieldIssue]:
        """Every violation of ``schema`` by ``instance`` as field issues under ``base`` (``/config``)."""
        validator = self._validator(key, schema)
        errors = sorted(
            map(most_specific, validator.iter_errors(instance)),
            key=lambda e: [str(p) for p in e.absolute_path],
        )
        issues: list[FieldIssue] = []
        for error in errors:
            issues.extend(_issues_of(error, base))
            if len(issues) >= MAX_SCHEMA_ISSUES:
                break
        return issues[:MAX_SCHEMA_ISSUES]


def secret_references(config: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """``(pointer, secret name)`` of every ``{"$secret": "<name>"}`` node in ``config``, depth first."""
    if isinstance(config, dict):
        name = config.get(SECRET_REF_KEY)
        if isinstance(name, str):
            yield json_pointer(path), name
            return
        for key, value in config.items():
            yield from secret_references(value, (*path, str(key)))
    elif isinstance(config, list):
        for index, value in enumerate(config):
            yield from secret_references(value, (*path, str(index)))


def pinned_references(config: Any, path: tuple[str, ...] = ()) -> Iterator[str]:
    """The pointers of ``{"$secret": …}`` nodes that say more than the name: a ``version``, another
    ``namespace`` than "default", anything else."""
    if isinstance(config, dict):
        if isinstance(config.get(SECRET_REF_KEY), str):
            if set(config) - {SECRET_REF_KEY, "namespace"} or config.get("namespace", "default") != "default":
                yield json_pointer(path)
            return
        for key, value in config.items():
            yield from pinned_references(value, (*path, str(key)))
    elif isinstance(config, list):
        for index, value in enumerate(config):
            yield from pinned_references(value, (*path, str(index)))
