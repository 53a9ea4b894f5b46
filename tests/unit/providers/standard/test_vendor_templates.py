"""``{{field}}`` templates of the standard providers."""

from __future__ import annotations

import json

import pytest

from wepush.agent.engine import BinaryRefValue, RecipientRecord, recipient_value
from wepush.agent.providers.spi import ValidationIssue
from wepush.agent.providers.standard._vendor import (
    JsonTemplate,
    RenderProblem,
    Template,
    TemplateSyntaxError,
    UnknownVariableError,
    html_escape,
    recipient_fields,
)


def test_placeholders_are_filled_from_recipient_fields() -> None:
    template = Template.parse("Hi {{ name }}, {{n}} items, vip={{vip}}, note={{note}}")

    text = template.render({"name": "Ann", "n": 3, "vip": True, "note": None})

    assert text == "Hi Ann, 3 items, vip=true, note="
    assert template.variables == ("name", "n", "vip", "note")


@pytest.mark.parametrize("source", ["{{a.__class__}}", "{{a b}}", "{{}}", "open {{name", "{{1abc}}"])
def test_expressions_and_malformed_placeholders_are_syntax_errors(source: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        Template.parse(source)


def test_a_missing_field_names_the_field() -> None:
    with pytest.raises(UnknownVariableError) as raised:
        Template.parse("{{email}}").render({"name": "x"})

    assert str(raised.value) == "recipient has no field 'email'"


def test_syntax_errors_become_validation_issues_at_the_field_path() -> None:
    issues: list[ValidationIssue] = []

    Template.checked("{{x.y}}", "/text", issues)

    assert [(i.path, i.code) for i in issues] == [("/text", "TEMPLATE_INVALID")]


def test_json_templates_fill_strings_and_a_value_cannot_break_out_of_its_string() -> None:
    issues: list[ValidationIssue] = []
    card = JsonTemplate.checked(
        {"header": {"title": "Hi {{name}}"}, "elements": [{"text": "{{name}}", "n": 1}], "{{key}}": True},
        "/card",
        issues,
    )

    rendered = card.render({"name": '", "admin": true, "x": "', "key": "ignored"})

    assert issues == []
    assert card.variables == frozenset({"name"})
    assert rendered["header"]["title"] == 'Hi ", "admin": true, "x": "'
    assert "admin" not in json.loads(json.dumps(rendered))
    assert rendered["{{key}}"] is True, "object keys are never templated"


def test_html_escaping_neutralises_markup() -> None:
    assert Template.parse("<p>{{v}}</p>").render({"v": '<script>"x"</script>'}, html_escape) == (
        "<p>&lt;script&gt;&quot;x&quot;&lt;/script&gt;</p>"
    )


def test_binary_references_are_not_usable_as_text() -> None:
    record = RecipientRecord("i", 1, {"file": BinaryRefValue("s3://bucket/x"), "name": recipient_value("A")})

    fields = recipient_fields(record)

    assert fields == {"name": "A"}


def test_unsupported_values_are_refused_as_invalid_values() -> None:
    with pytest.raises(RenderProblem) as raised:
        Template.parse("{{v}}").render({"v": object()})

    assert raised.value.suffix == "RECIPIENT_VALUE_INVALID"
