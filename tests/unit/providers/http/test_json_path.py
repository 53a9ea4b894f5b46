from __future__ import annotations

import pytest

from wepush.agent.providers.http import JsonPath, JsonPathSyntaxError
from wepush.agent.providers.http._json_path import json_values_equal

DOCUMENT = {
    "success": True,
    "code": 0,
    "data": {"items": [{"status": "sent"}, {"status": "queued"}], "odd key": "v", "a.b": 1},
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("$", DOCUMENT),
        ("$.success", True),
        ("$.code", 0),
        ("$.data.items[0].status", "sent"),
        ("$.data.items[-1].status", "queued"),
        ("$['data']['odd key']", "v"),
        ('$.data["a.b"]', 1),
    ],
)
def test_supported_paths_find_their_value(expression: str, expected: object) -> None:
    assert JsonPath.parse(expression).find(DOCUMENT) == (True, expected)


@pytest.mark.parametrize(
    "expression", ["$.missing", "$.data.items[5]", "$.success.deeper", "$.data.items.status", "$.code[0]"]
)
def test_absent_paths_are_reported_as_not_found(expression: str) -> None:
    assert JsonPath.parse(expression).find(DOCUMENT) == (False, None)


@pytest.mark.parametrize(
    "expression", ["success", "$..status", "$.items[*]", "$.items[0:2]", "$[?(@.a)]", "$.a b"]
)
def test_unsupported_syntax_is_rejected(expression: str) -> None:
    with pytest.raises(JsonPathSyntaxError):
        JsonPath.parse(expression)


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (True, True, True),
        (True, 1, False),
        (0, False, False),
        (1, 1.0, True),
        ("ok", "ok", True),
        ("1", 1, False),
        (None, None, True),
        ([1, True], [1, True], True),
        ([1, True], [1, 1], False),
        ({"a": [0]}, {"a": [0]}, True),
        ({"a": [0]}, {"a": [False]}, False),
    ],
)
def test_json_equality_distinguishes_booleans_from_numbers(left: object, right: object, equal: bool) -> None:
    assert json_values_equal(left, right) is equal
