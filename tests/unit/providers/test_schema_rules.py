"""The value-free wording of schema violations, for the bounds Draft 4 spells with a flag."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from wepush.agent.providers.common import most_specific, value_free_rule, violation_path
from wepush.agent.providers.common._schema_rules import PATTERN_RULE, with_ecma_pattern


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


_REPLACE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["operation", "value"],
    "properties": {"operation": {"enum": ["REPLACE"]}, "value": {"type": "string", "minLength": 1}},
}
_KEEP = {
    "type": "object",
    "additionalProperties": False,
    "required": ["operation"],
    "properties": {"operation": {"enum": ["KEEP"]}},
}
_SECRETS = {"type": "object", "additionalProperties": {"oneOf": [_REPLACE, _KEEP]}}


def _specific(instance: Any) -> tuple[str, str, str]:
    (error,) = Draft4Validator(_SECRETS).iter_errors({"token": instance})
    found = most_specific(error)
    path = "/" + "/".join(map(str, violation_path(found)))
    return path, str(found.validator), value_free_rule(found)


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        # The operation picks the alternative; what is wrong inside it is what the client must fix.
        ({"operation": "REPLACE", "value": ""}, ("/token/value", "minLength", "must satisfy minLength=1")),
        ({"operation": "REPLACE"}, ("/token/value", "required", "is required")),
        (
            {"operation": "KEEP", "value": "s3cr3t"},
            (
                "/token",
                "additionalProperties",
                "Additional properties are not allowed ('value' was unexpected)",
            ),
        ),
        # No alternative has this operation: the operation itself is at fault.
        ({"operation": "ROTATE"}, ("/token/operation", "enum", "must be one of ['REPLACE', 'KEEP']")),
        # Every alternative wants an object.
        ("s3cr3t", ("/token", "type", 'must satisfy type="object"')),
    ],
)
def test_a_violation_inside_alternatives_names_the_one_the_instance_meant(
    instance: Any, expected: tuple[str, str, str]
) -> None:
    found = _specific(instance)
    assert found == expected
    assert "s3cr3t" not in found[2]


def test_alternatives_that_no_member_tells_apart_stay_one_shape_violation() -> None:
    schema = {"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]}
    (error,) = Draft4Validator(schema).iter_errors({})
    assert value_free_rule(most_specific(error)) == "does not match the expected shape (oneOf)"


_ECMA = with_ecma_pattern(Draft4Validator)


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        (r"^[a-f0-9]{4}$", "beef", True),
        # Python's ``$`` matches before a final line break; ECMA-262's, the one JSON Schema names, does not.
        (r"^[a-f0-9]{4}$", "beef\n", False),
        (r"(ab$|cd$)", "cd\n", False),
        # An escaped ``$`` and one inside a character class are characters, not anchors.
        (r"^a\$$", "a$", True),
        (r"^[$]$", "$", True),
        (r"^[]$]$", "]", True),
        (r"^[^]$]x$", "ax", True),
        (r"^[^]$]x$", "ax\n", False),
        # Unanchored patterns still search anywhere, as the keyword says.
        (r"b", "abc", True),
    ],
)
def test_the_pattern_keyword_anchors_dollar_at_the_end_of_the_text(
    pattern: str, value: str, matches: bool
) -> None:
    assert (not list(_ECMA({"pattern": pattern}).iter_errors(value))) is matches


def test_a_pattern_that_says_what_it_means_is_reported_in_those_words() -> None:
    said = {"type": "string", "pattern": "^x$", PATTERN_RULE: "must be the letter x"}
    assert _rule(Draft4Validator, said, "y") == "must be the letter x"
    assert (
        _rule(Draft4Validator, {"type": "string", "pattern": "^x$"}, "y")
        == "does not match the required pattern"
    )
