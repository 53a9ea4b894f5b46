"""A refusal the SDK makes itself carries the Service's code and words, never pydantic's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from wepush.sdk.remote import InvalidRequest
from wepush.sdk.remote._support import as_model
from wepush.sdk.remote._wording import PATTERN_RULES
from wepush_client.models import AudienceCreate, ExecutionPolicies, JobCreate


def _pattern_rules(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        if "x-wepush-pattern-rule" in node:
            yield node["pattern"], node["x-wepush-pattern-rule"]
        for value in node.values():
            yield from _pattern_rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _pattern_rules(value)


def test_every_pattern_the_contract_words_is_worded_alike() -> None:
    contract = json.loads(resources.files("wepush.generated.resources").joinpath("openapi.json").read_text())

    assert dict(_pattern_rules(contract)) == dict(PATTERN_RULES)


def _refused(model: Any, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(InvalidRequest) as raised:
        as_model(model, body)
    return [(e.field, e.code, e.message) for e in raised.value.errors]


def test_a_name_breaking_its_pattern_is_refused_in_the_contracts_words() -> None:
    assert _refused(AudienceCreate, {"name": "tab\tinside"}) == [
        (
            "/name",
            "INVALID",
            "must not start or end with white space, nor contain control characters, line breaks or "
            "invisible formatting characters",
        )
    ]


def test_a_pattern_the_contract_does_not_word_is_not_spelled_out() -> None:
    policies = {"retry": {"maxAttempts": 2, "initialDelay": "two seconds"}}

    assert _refused(ExecutionPolicies, policies) == [
        ("/retry/initialDelay", "INVALID", "does not match the required pattern")
    ]


def test_a_name_is_composed_before_it_is_measured() -> None:
    job = {"accountId": "a", "messageId": "m", "messageRevision": 1, "audienceSnapshotId": "s"}

    assert as_model(JobCreate, {**job, "name": "e\u0301" * 200}).name == "\u00e9" * 200
    assert _refused(JobCreate, {**job, "name": "e\u0301" * 201}) == [
        ("/name", "INVALID", "must satisfy maxLength=200")
    ]
