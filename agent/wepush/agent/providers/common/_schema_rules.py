"""The rule a JSON Schema violation broke, in words that never quote the value.

jsonschema's own messages quote the instance (``'sk-live-…' is not of type 'object'``), and a value sent
for validation may be a secret pasted into the wrong field. Every problem a provider reports about an
account's configuration or a message's content, and every one the Service answers with or logs about a
request body or a parameter, is worded here instead. It depends on nothing but jsonschema, so the
Service's application layer imports this module without the HTTP libraries the package holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

from jsonschema import ValidationError

__all__ = ["value_free_rule", "violation_path"]

_SHAPES: Final = frozenset({"oneOf", "anyOf", "allOf", "not", "properties", "items", "discriminator"})
_MAX_CONSTRAINT: Final = 200
_DRAFT4_EXCLUSIVE: Final = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}
_REQUIRED: Final = re.compile(r"^'(?P<name>.+)' is a required property$", re.DOTALL)


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
        return "does not match the required pattern"
    if (
        rule in _DRAFT4_EXCLUSIVE
        and isinstance(error.schema, dict)
        and error.schema.get(_DRAFT4_EXCLUSIVE[rule])
    ):
        # Draft 4 spells "greater than 0" as minimum 0 plus a boolean flag, and reports it as "minimum":
        # "must satisfy minimum=0" for a 0 that was refused would read as a contradiction.
        rule = _DRAFT4_EXCLUSIVE[rule]
    return f"must satisfy {rule}={json.dumps(constraint, default=str)[:_MAX_CONSTRAINT]}"
