from __future__ import annotations

import json

import pytest

from wepush.agent.providers.http import Escaping, Template, TemplateSyntaxError, UnknownVariableError

BODY = '{"mobile":"{{mobile}}","content":"{{content}}"}'


def render_json(values: dict[str, object]) -> object:
    return json.loads(Template.parse(BODY).render(values, Escaping.JSON_STRING))


@pytest.mark.parametrize(
    "content",
    [
        'say "hi"',
        "back\\slash \\u0041",
        "line one\nline two\r\n\ttabbed",
        "中文 ✓ emoji 🎉 and \u2028 separator",
        '", "admin": true, "x": "',
        "\x00\x07\x1f control",
        "{{content}}",
    ],
)
def test_json_body_keeps_any_value_inside_its_string(content: str) -> None:
    document = render_json({"mobile": "13800000000", "content": content})

    assert document == {"mobile": "13800000000", "content": content}


def test_injection_attempt_cannot_add_json_keys() -> None:
    document = render_json({"mobile": '1", "role": "admin', "content": "x"})

    assert isinstance(document, dict)
    assert set(document) == {"mobile", "content"}
    assert document["mobile"] == '1", "role": "admin'


def test_scalar_values_render_as_json_text() -> None:
    template = Template.parse('{"n": {{n}}, "f": {{f}}, "ok": {{ok}}, "none": "{{none}}"}')

    rendered = template.render({"n": 42, "f": 1.5, "ok": True, "none": None}, Escaping.JSON_STRING)

    assert json.loads(rendered) == {"n": 42, "f": 1.5, "ok": True, "none": ""}


@pytest.mark.parametrize(
    "source",
    [
        "{{a.__class__}}",
        "{{content.__class__.__mro__}}",
        "{{ a['b'] }}",
        "{{a()}}",
        "{{ __import__('os').system('id') }}",
        "{{a|upper}}",
        "{{}}",
        "{{1abc}}",
        "open {{ but never closed",
    ],
)
def test_expressions_and_attribute_access_are_syntax_errors(source: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        Template.parse(source)


def test_dunder_names_are_plain_field_lookups_not_attribute_access() -> None:
    template = Template.parse("{{__class__}}")

    with pytest.raises(UnknownVariableError) as raised:
        template.render({"content": "x"}, Escaping.RAW)
    assert raised.value.name == "__class__"


def test_unknown_variable_names_the_missing_field() -> None:
    template = Template.parse(BODY)

    with pytest.raises(UnknownVariableError) as raised:
        template.render({"mobile": "1"}, Escaping.JSON_STRING)

    assert raised.value.name == "content"
    assert "content" in str(raised.value)


def test_whitespace_inside_braces_is_allowed_and_nested_json_braces_are_literal() -> None:
    template = Template.parse('{"a":{"b":"{{ name }}"}}')

    assert template.variables == ("name",)
    assert template.render({"name": "x"}, Escaping.JSON_STRING) == '{"a":{"b":"x"}}'


def test_form_escaping_percent_encodes_separators() -> None:
    template = Template.parse("to={{to}}&text={{text}}")

    rendered = template.render({"to": "a&b=c", "text": "hi there+1"}, Escaping.FORM)

    assert rendered == "to=a%26b%3Dc&text=hi+there%2B1"


def test_path_segment_escaping_keeps_a_value_in_one_segment() -> None:
    template = Template.parse("/users/{{id}}/notify")

    rendered = template.render({"id": "../admin/x?y#z"}, Escaping.PATH_SEGMENT)

    assert rendered == "/users/..%2Fadmin%2Fx%3Fy%23z/notify"


@pytest.mark.parametrize("value", [".", ".."])
def test_path_segment_rejects_dot_segments(value: str) -> None:
    with pytest.raises(ValueError, match="dot segment"):
        Template.parse("/users/{{id}}").render({"id": value}, Escaping.PATH_SEGMENT)


def test_constant_template_renders_unchanged() -> None:
    template = Template.parse('{"static": true}')

    assert template.is_constant
    assert template.render({}, Escaping.JSON_STRING) == '{"static": true}'


def test_non_finite_numbers_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        Template.parse("{{x}}").render({"x": float("nan")}, Escaping.RAW)
