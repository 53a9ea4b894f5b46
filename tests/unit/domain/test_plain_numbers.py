"""Whole numbers a client wrote as floats are the same JSON number as the integer."""

from __future__ import annotations

import math

from wepush.server.domain import content_hash, plain_numbers


def test_whole_floats_become_integers_at_any_depth_and_nothing_else_changes() -> None:
    document = {
        "timeoutMs": 4096.0,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "text": "4096.0",
        "nested": [{"n": -0.0}, [2.0, 3], {"deep": {"x": 1e3}}],
    }

    plain = plain_numbers(document)

    assert plain == {
        "timeoutMs": 4096,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "text": "4096.0",
        "nested": [{"n": 0}, [2, 3], {"deep": {"x": 1000}}],
    }
    assert type(plain["timeoutMs"]) is int
    assert type(plain["flag"]) is bool
    assert content_hash(plain) == content_hash({**document, "timeoutMs": 4096, "nested": plain["nested"]})


def test_large_whole_floats_below_the_exponent_form_become_the_integers_json_readers_see() -> None:
    assert plain_numbers(1e20) == 10**20
    assert type(plain_numbers(1e20)) is int
    assert plain_numbers(9007199254740992.0) == 2**53
    assert plain_numbers(-(2.0**60)) == -(2**60)
    assert content_hash(plain_numbers({"equals": 1e20})) == content_hash({"equals": 100000000000000000000})


def test_floats_in_exponent_form_and_non_finite_values_are_left_as_written() -> None:
    assert type(plain_numbers(1e21)) is float
    assert type(plain_numbers(-1e300)) is float
    assert math.isinf(plain_numbers(math.inf))
