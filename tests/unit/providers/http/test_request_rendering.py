from __future__ import annotations

import json
from typing import Any

import pytest

from wepush.agent.engine import BinaryRefValue, RecipientRecord
from wepush.agent.providers.http import HttpProviderFactory, UnknownVariableError
from wepush.agent.providers.http._config import parse_account, parse_message
from wepush.agent.providers.http._request import RecipientFields, RecipientValueError, RequestRenderer
from wepush.agent.providers.spi import ConfigDocument

SCHEMAS = HttpProviderFactory().descriptor().schemas


def renderer(account: dict[str, Any], message: dict[str, Any]) -> RequestRenderer:
    return RequestRenderer(
        parse_account(ConfigDocument.from_json("a", "1", account), SCHEMAS.account),
        parse_message(ConfigDocument.from_json("m", "1", message), SCHEMAS.message),
    )


def fields(**values: Any) -> RecipientFields:
    return RecipientFields(RecipientRecord.of("item-1", 1, values).fields)


def test_path_is_joined_to_the_base_path_and_queries_are_merged() -> None:
    rendered = renderer(
        {"baseUrl": "https://api.example.com/v1/?tenant=7"},
        {"path": "/notify", "query": {"lang": "zh", "to": "{{mobile}}"}},
    ).render(fields(mobile="+86 138"))

    assert rendered.url.host == "api.example.com"
    assert rendered.url.path == "/v1/notify"
    assert dict(rendered.url.query) == {"tenant": "7", "lang": "zh", "to": "+86 138"}


def test_a_spaced_path_placeholder_is_filled_and_encoded_as_one_segment() -> None:
    rendered = renderer({"baseUrl": "https://api.example.com"}, {"path": "/cities/{{ city }}/notify"}).render(
        fields(city="San Jose/CA")
    )

    assert rendered.url.raw_path == "/cities/San%20Jose%2FCA/notify"


@pytest.mark.parametrize(
    "value",
    [
        "@evil.example",
        "//evil.example/x",
        "evil.example:80",
        "http://evil.example",
        "a/../../b",
        "%2F%2Fevil",
    ],
)
def test_recipient_values_never_change_the_host(value: str) -> None:
    rendered = renderer({"baseUrl": "https://api.example.com"}, {"path": "/users/{{id}}"}).render(
        fields(id=value)
    )

    assert rendered.url.host == "api.example.com"
    assert rendered.url.port == 443
    assert rendered.url.raw_path.count("/") == 2


def test_json_body_and_headers_are_rendered_from_the_recipient() -> None:
    rendered = renderer(
        {"baseUrl": "https://api.example.com", "defaultHeaders": {"User-Agent": "WePush-Next"}},
        {
            "headers": {"Content-Type": "application/json", "X-Trace": "r-{{id}}"},
            "bodyTemplate": '{"to":"{{mobile}}","text":"{{content}}"}',
        },
    ).render(fields(id=7, mobile="138", content='He said "hi"\n'))

    assert rendered.headers["User-Agent"] == "WePush-Next"
    assert rendered.headers["X-Trace"] == "r-7"
    assert rendered.body is not None
    assert json.loads(rendered.body) == {"to": "138", "text": 'He said "hi"\n'}


def test_account_default_content_type_selects_json_escaping() -> None:
    rendered = renderer(
        {"baseUrl": "https://api.example.com", "defaultHeaders": {"Content-Type": "application/json"}},
        {"bodyTemplate": '{"text":"{{content}}"}'},
    ).render(fields(content='"quoted"'))

    assert rendered.body == b'{"text":"\\"quoted\\""}'


def test_header_injection_through_a_recipient_value_is_refused() -> None:
    render = renderer({"baseUrl": "https://api.example.com"}, {"headers": {"X-Name": "{{name}}"}})

    with pytest.raises(RecipientValueError) as raised:
        render.render(fields(name="x\r\nX-Admin: 1"))
    assert raised.value.field == "X-Name"
    # It names the header, not a recipient field called X-Name (there is none).
    assert str(raised.value) == "header 'X-Name' would get a line break or NUL from the recipient's values"


def test_a_query_value_with_a_line_break_is_refused_naming_the_parameter() -> None:
    render = renderer({"baseUrl": "https://api.example.com"}, {"query": {"to": "{{name}}"}})

    with pytest.raises(RecipientValueError) as raised:
        render.render(fields(name="a\nb"))
    assert (
        str(raised.value) == "query parameter 'to' would get a line break or NUL from the recipient's values"
    )


def test_missing_field_is_reported_by_name() -> None:
    render = renderer({"baseUrl": "https://api.example.com"}, {"bodyTemplate": "{{content}}"})

    with pytest.raises(UnknownVariableError) as raised:
        render.render(fields(other="x"))
    assert raised.value.name == "content"


def test_binary_reference_cannot_be_rendered_as_text() -> None:
    render = renderer({"baseUrl": "https://api.example.com"}, {"bodyTemplate": "{{file}}"})
    record = RecipientRecord("i", 1, {"file": BinaryRefValue("artifact://x")})

    with pytest.raises(RecipientValueError):
        render.render(RecipientFields(record.fields))
