"""One rule for a recipient field name, written in three places that cannot import each other: the
contract's RecipientFieldName, the Service's import settings and the agent's template placeholders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from wepush.agent.providers.common._template import _NAME as TEMPLATE_NAME
from wepush.server.application._import_settings import FIELD_NAME

SCHEMA = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "contracts/openapi/schemas/audience.yaml").read_text("utf-8")
)["RecipientFieldName"]

NAMES = [
    "mobile",
    "_id",
    "first-name",
    "Name_2",
    "x" * 128,
    "x" * 129,
    "",
    "1st",
    "first name",
    "手机",
    "a.b",
    "-x",
]


def _contract_allows(name: str) -> bool:
    return (
        SCHEMA["minLength"] <= len(name) <= SCHEMA["maxLength"]
        and re.search(SCHEMA["pattern"], name) is not None
    )


@pytest.mark.parametrize("name", NAMES)
def test_the_contract_the_service_and_the_templates_agree_on_a_field_name(name: str) -> None:
    allowed = _contract_allows(name)
    assert bool(FIELD_NAME.fullmatch(name)) is allowed
    assert bool(TEMPLATE_NAME.fullmatch(name)) is allowed
