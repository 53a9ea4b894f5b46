"""The value-free wording of schema violations, for the bounds Draft 4 spells with a flag."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from wepush.agent.providers.common import value_free_rule


def _rule(
    validator: type[Draft4Validator] | type[Draft202012Validator], schema: dict[str, Any], value: Any
) -> str:
    (error,) = validator(schema).iter_errors(value)
    return value_free_rule(error)


@pytest.mark.parametrize(
    ("schema", "value", "says"),
    [
        ({"type": "number", "minimum": 0, "exclusiveMinimum": True}, 0, "must satisfy exclusiveMinimum=0"),
        ({"type": "number", "maximum": 10, "exclusiveMaximum": True}, 10, "must satisfy exclusiveMaximum=10"),
        ({"type": "number", "minimum": 1, "exclusiveMinimum": False}, 0, "must satisfy minimum=1"),
        ({"type": "number", "minimum": 1}, 0, "must satisfy minimum=1"),
    ],
)
def test_a_draft_4_bound_is_named_exclusive_when_its_flag_makes_it_so(
    schema: dict[str, Any], value: Any, says: str
) -> None:
    assert _rule(Draft4Validator, schema, value) == says


def test_a_draft_2020_exclusive_bound_keeps_its_own_name() -> None:
    assert _rule(Draft202012Validator, {"exclusiveMinimum": 0}, 0) == "must satisfy exclusiveMinimum=0"
