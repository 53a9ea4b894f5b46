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


def test_floats_beyond_exact_integers_and_non_finite_values_are_left_as_written() -> None:
    huge = 2.0**60
    assert type(plain_numbers(huge)) is float
    assert type(plain_numbers(2.0**53 - 1)) is int
    assert math.isinf(plain_numbers(math.inf))
