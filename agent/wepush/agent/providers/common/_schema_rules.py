"""The rule a JSON Schema violation broke, in words that never quote the value.

jsonschema's own messages quote the instance (``'sk-live-…' is not of type 'object'``), and a value sent
for validation may be a secret pasted into the wrong field. Every problem a provider reports about an
account's configuration or a message's content, and every one the Service answers with or logs about a
request body or a parameter, is worded here instead. It depends on nothing but jsonschema, so the
Service's application layer imports this module without the HTTP libraries the package holds.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

__all__ = [
    "PATTERN_RULE",
    "Draft202012",
    "ecma_pattern",
    "most_specific",
    "value_free_rule",
    "violation_path",
    "with_ecma_pattern",
]

#: A schema's own words for what its ``pattern`` requires, said instead of the pattern when it fails.
PATTERN_RULE: Final = "x-wepush-pattern-rule"

_SHAPES: Final = frozenset({"oneOf", "anyOf", "allOf", "not", "properties", "items", "discriminator"})
_MAX_CONSTRAINT: Final = 200
_DRAFT4_EXCLUSIVE: Final = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}
_REQUIRED: Final = re.compile(r"^'(?P<name>.+)' is a required property$", re.DOTALL)


_ALTERNATIVES: Final = frozenset({"oneOf", "anyOf"})
_CONSTANTS: Final = frozenset({"enum", "const"})


def most_specific(error: ValidationError) -> ValidationError:
    """The violation inside a ``oneOf``/``anyOf`` that the instance was evidently meant to match.

    ``"does not match the expected shape (oneOf)"`` tells a client nothing. When the alternatives are
    told apart by a constant member (``{"operation": "REPLACE"}`` against ``{"operation": "KEEP"}``),
    every alternative but one is ruled out by that member, and the violation inside the remaining one
    (``/value: must satisfy minLength=1``) is what the client has to fix. When every alternative is
    ruled out by the same member, that member is at fault: it must be one of their constants.
    """
    while error.validator in _ALTERNATIVES and error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        depth = len(error.absolute_path) + 1
        ruled_out = {
            branch: [sub for sub in subs if sub.validator in _CONSTANTS and len(sub.absolute_path) == depth]
            for branch, subs in branches.items()
        }
        left = [branch for branch, constants in ruled_out.items() if not constants]
        if len(left) == 1:
            error = sorted(branches[left[0]], key=lambda sub: list(map(str, sub.absolute_path)))[0]
            continue
        members = {
            tuple(map(str, sub.absolute_path)) for constants in ruled_out.values() for sub in constants
        }
        if not left and len(members) == 1:
            return _one_of_constants(error, [sub for constants in ruled_out.values() for sub in constants])
        types = [
            sub
            for subs in branches.values()
            for sub in subs
            if sub.validator == "type" and len(sub.absolute_path) == depth - 1
        ]
        if len(types) == len(branches) and len({json.dumps(sub.validator_value) for sub in types}) == 1:
            return types[0]  # a string where every alternative wants an object: "must satisfy type=object"
        break
    return error


def _one_of_constants(error: ValidationError, constants: list[ValidationError]) -> ValidationError:
    allowed: list[Any] = []
    for sub in constants:
        constraint = sub.validator_value
        values = constraint if sub.validator == "enum" and isinstance(constraint, list) else [constraint]
        allowed.extend(value for value in values if value not in allowed)
    member = constants[0]
    return ValidationError(
        "not one of the alternatives' constants",
        validator="enum",
        validator_value=allowed,
        path=member.absolute_path,
        schema_path=error.absolute_schema_path,
    )


def violation_path(error: ValidationError) -> Sequence[str | int]:
    """Where the violation is; for a missing property, the property itself rather than its object."""
    path: list[str | int] = list(error.absolute_path)
    if error.validator == "required":
        match = _REQUIRED.match(str(error.message))
        if match:
            path.append(match.group("name"))
    return path


def value_free_rule(error: ValidationError) -> str:
    """``must satisfy type="object"``, ``is required``, ``must be one of [...]`` …: the rule, not the value."""
    rule = str(error.validator)
    constraint = error.validator_value
    if rule == "required":
        return "is required"
    if rule == "additionalProperties":
        # jsonschema names the unexpected keys, never their values.
        return str(error.message)
    if rule == "minProperties":
        return f"must have at least {constraint} properties"
    if rule == "maxProperties":
        return f"must have at most {constraint} properties"
    if rule in _SHAPES:
        return f"does not match the expected shape ({rule})"
    if rule == "enum" and isinstance(constraint, list | tuple):
        return f"must be one of {list(constraint)[:20]}"
    if rule == "pattern":
        # A schema may say in words what its pattern means; the pattern itself reads as noise.
        said = error.schema.get(PATTERN_RULE) if isinstance(error.schema, dict) else None
        return str(said)[:_MAX_CONSTRAINT] if isinstance(said, str) else "does not match the required pattern"
    if (
        rule in _DRAFT4_EXCLUSIVE
        and isinstance(error.schema, dict)
        and error.schema.get(_DRAFT4_EXCLUSIVE[rule])
    ):
        # Draft 4 spells "greater than 0" as minimum 0 plus a boolean flag, and reports it as "minimum":
        # "must satisfy minimum=0" for a 0 that was refused would read as a contradiction.
        rule = _DRAFT4_EXCLUSIVE[rule]
    return f"must satisfy {rule}={json.dumps(constraint, default=str)[:_MAX_CONSTRAINT]}"


def ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """The ``pattern`` keyword as JSON Schema defines it (ECMA-262): ``$`` matches only at the end.

    jsonschema hands the pattern to Python's ``re``, whose ``$`` also matches before a final line break,
    so ``^[a-f0-9]{64}$`` or a name pattern that refuses line breaks would let ``"…\\n"`` through."""
    if validator.is_type(instance, "string") and not _end_anchored(pattern).search(instance):
        yield ValidationError(f"does not match {pattern!r}")


@functools.cache
def with_ecma_pattern(validator_class: type[Validator]) -> type[Validator]:
    """``validator_class`` with :func:`ecma_pattern` as its ``pattern`` keyword (one class per class)."""
    extended: type[Validator] = extend(validator_class, {"pattern": ecma_pattern})  # type: ignore[no-untyped-call]
    return extended


#: JSON Schema 2020-12, the dialect of provider, manifest and configuration schemas, with ECMA-262 ``$``.
Draft202012 = with_ecma_pattern(Draft202012Validator)


@functools.lru_cache(maxsize=256)
def _end_anchored(pattern: str) -> re.Pattern[str]:
    """``pattern`` with every ``$`` that is an anchor (not escaped, not in a character class) spelled
    ``\\Z``, Python's end of the string."""
    out: list[str] = []
    position, in_class, class_body = 0, False, 0
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            out.append(pattern[position : position + 2])
            position += 2
            continue
        if in_class:
            # As in Python's re, a ``]`` first in the class (``[]a]``, ``[^]a]``) is one of its members.
            in_class = char != "]" or position == class_body
        elif char == "[":
            in_class, class_body = True, position + (2 if pattern[position + 1 : position + 2] == "^" else 1)
        elif char == "$":
            char = "\\Z"
        out.append(char)
        position += 1
    return re.compile("".join(out))
