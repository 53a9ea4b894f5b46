"""Which Recipient fields a message revision's placeholders name, read from the provider's message schema."""

from __future__ import annotations

from typing import Any

from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.standard import SmtpProviderFactory
from wepush.server.application._job_variables import template_variables


def test_http_placeholders_are_found_in_every_templated_member_and_nowhere_else() -> None:
    schema = HttpProviderFactory().descriptor().schemas.message
    content = {
        "method": "POST",
        "path": "/users/{{id}}",
        "headers": {"X-Name": "{{ name }}", "Content-Type": "application/json"},
        "query": {"c": "{{code}}"},
        "bodyTemplate": '{"m":"{{mobile}}","again":"{{id}}"}',
        "externalRequestIdHeader": "X-{{not_a_template}}",
    }

    assert template_variables(schema, content) == {"id", "name", "code", "mobile"}


def test_smtp_field_names_are_not_placeholders() -> None:
    schema = SmtpProviderFactory().descriptor().schemas.message
    content = {"subject": "Hi {{name}}", "htmlBody": "<p>{{body}}</p>", "toField": "email"}

    assert template_variables(schema, content) == {"name", "body"}


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"Text": {"type": "string", "x-wepush-variable": True}},
    "properties": {
        "title": {"$ref": "#/$defs/Text"},
        "card": {
            "oneOf": [
                {"type": "object", "properties": {"kind": {"const": "plain"}}},
                {"type": "object", "properties": {"body": {"$ref": "#/$defs/Text"}}},
            ]
        },
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/Text"}]},
        "labels": {"type": "object", "patternProperties": {"^x-": {"$ref": "#/$defs/Text"}}},
        "articles": {"type": "array", "items": {"type": "object", "x-wepush-variable": True}},
        "code": {"type": "string"},
        "remote": {"$ref": "https://example.com/elsewhere.json"},
    },
}


def test_references_branches_tuples_patterns_and_marked_containers_are_followed() -> None:
    content = {
        "title": "{{a}}",
        "card": {"kind": "{{not_b}}", "body": "{{b}}"},
        "pair": ["{{not_c}}", "{{c}}"],
        "labels": {"x-one": "{{d}}", "other": "{{not_d}}"},
        "articles": [{"title": "{{e}}", "links": ["https://x/{{f}}"]}],
        "code": "{{not_g}}",
        "remote": "{{not_h}}",
    }

    assert template_variables(_SCHEMA, content) == {"a", "b", "c", "d", "e", "f"}


def test_a_malformed_template_names_nothing_rather_than_failing() -> None:
    assert template_variables(_SCHEMA, {"title": "{{a.__class__}} {{b}}"}) == set()
    assert template_variables(_SCHEMA, {"title": "no placeholders"}) == set()
    assert template_variables(_SCHEMA, "not an object") == set()
