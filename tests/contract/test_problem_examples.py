"""The contract's problem examples are what integrators copy into their error handling: each must show
the ``type`` URI and title the Service really sends with that code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from wepush.server.api._problems import CODES, problem_body

OPENAPI = Path(__file__).resolve().parents[2] / "contracts" / "openapi"


def _problem_examples() -> Iterator[tuple[str, dict[str, Any]]]:
    responses = yaml.safe_load((OPENAPI / "responses.yaml").read_text(encoding="utf-8"))
    for name, response in responses.items():
        for media_type, content in response.get("content", {}).items():
            if media_type == "application/problem+json" and "example" in content:
                yield f"responses.yaml#{name}", content["example"]
    problem = yaml.safe_load((OPENAPI / "schemas" / "problem.yaml").read_text(encoding="utf-8"))
    yield "problem.yaml#Problem.type", {"type": problem["Problem"]["properties"]["type"]["example"]}


EXAMPLES = list(_problem_examples())


def test_the_contract_has_problem_examples() -> None:
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize(("where", "example"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_each_problem_example_shows_what_the_service_sends(where: str, example: dict[str, Any]) -> None:
    code = example.get("code") or _code_of(example["type"])
    assert code in CODES, f"{where}: {code} is not a code the Service sends"
    sent = problem_body(code, "detail")
    assert example["type"] == sent["type"], where
    if "title" in example:
        assert example["title"] == sent["title"], where


def _code_of(type_uri: str) -> str:
    return type_uri.rsplit("/", 1)[-1].upper().replace("-", "_")
