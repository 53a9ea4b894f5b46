from __future__ import annotations

from typing import Any

import pytest

from wepush.agent.providers.http import HttpProviderFactory
from wepush.agent.providers.spi import ConfigDocument, ValidationResult

FACTORY = HttpProviderFactory()


def account(**overrides: Any) -> ConfigDocument:
    body: dict[str, Any] = {"baseUrl": "https://api.example.com/v1"}
    body.update(overrides)
    return ConfigDocument.from_json("wepush.http/account", "1", body)


def message(**overrides: Any) -> ConfigDocument:
    body: dict[str, Any] = {"method": "POST", "path": "/notify"}
    body.update(overrides)
    return ConfigDocument.from_json("wepush.http/message", "1", body)


def issue_paths(result: ValidationResult) -> dict[str, str]:
    return {issue.path: issue.code for issue in result.issues}


def test_seed_example_account_and_message_are_valid() -> None:
    seed_account = account(
        baseUrl="https://api.example.com",
        defaultHeaders={"User-Agent": "WePush-Next"},
        auth={"type": "BEARER", "token": {"$secret": "http-account-token"}},
        connectTimeout="PT5S",
    )
    seed_message = message(
        headers={"Content-Type": "application/json"},
        query={},
        bodyTemplate='{"mobile":"{{mobile}}","content":"{{content}}"}',
        successCondition={"status": [200, 201], "jsonPath": "$.success", "equals": True},
        saveResponseBody=False,
    )

    assert FACTORY.validate_account(seed_account) == ValidationResult.valid()
    assert FACTORY.validate_message(seed_message) == ValidationResult.valid()


@pytest.mark.parametrize(
    ("overrides", "path", "code"),
    [
        ({"baseUrl": "ftp://files.example.com"}, "/baseUrl", "SCHEMA_PATTERN"),
        ({"baseUrl": "https://user:pw@api.example.com"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        ({"baseUrl": "http://169.254.169.254/latest"}, "/baseUrl", "ADDRESS_REFUSED"),
        ({"baseUrl": "http://127.0.0.1:8080"}, "/baseUrl", "ADDRESS_REFUSED"),
        ({"baseUrl": "http://[::ffff:10.0.0.1]/"}, "/baseUrl", "ADDRESS_REFUSED"),
        ({"baseUrl": "http://2130706433/"}, "/baseUrl", "ADDRESS_REFUSED"),
        # An IDNA label that does not decode used to escape as a UnicodeError: a 500 from the API.
        ({"baseUrl": "https://xn--a.example/"}, "/baseUrl", "INVALID_URL"),
        ({"auth": {"type": "BEARER"}}, "/auth/token", "SCHEMA_REQUIRED"),
        ({"auth": {"type": "BEARER", "token": "plain-text-token"}}, "/auth/token", "SCHEMA_TYPE"),
        ({"auth": {"type": "BASIC", "username": "u"}}, "/auth/password", "SCHEMA_REQUIRED"),
        ({"auth": {"type": "DIGEST"}}, "/auth/type", "SCHEMA_ENUM"),
        ({"connectTimeout": "5"}, "/connectTimeout", "SCHEMA_PATTERN"),
        ({"connectTimeout": "PT0S"}, "/connectTimeout", "NOT_POSITIVE"),
        ({"allowedCidrs": ["10.0.0.1/8"]}, "/allowedCidrs/0", "INVALID_CIDR"),
        ({"defaultHeaders": {"Host": "evil.example"}}, "/defaultHeaders/Host", "HEADER_FORBIDDEN"),
        # Plain configuration is shown to every VIEWER: credentials go through auth and a secret.
        (
            {"defaultHeaders": {"Authorization": "Bearer x"}},
            "/defaultHeaders/Authorization",
            "CREDENTIALS_IN_HEADER",
        ),
        ({"defaultHeaders": {"X-Api-Key": "k-123"}}, "/defaultHeaders/X-Api-Key", "CREDENTIALS_IN_HEADER"),
        ({"baseUrl": "https://api.example.com/send?access_token=t-1"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        ({"baseUrl": "https://api.example.com/send?lang=zh&apiKey=k-1"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        # Servers that split a query on ';' too, and a path segment's ';name=value' parameters.
        ({"baseUrl": "https://api.example.com/send?a=1;token=t-1"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        ({"baseUrl": "https://api.example.com/send;token=t-1"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        ({"baseUrl": "https://api.example.com/v1;Api%5FKey=k-1/send"}, "/baseUrl", "CREDENTIALS_IN_URL"),
        ({"auth": {"type": "QUERY", "value": {"$secret": "k"}}}, "/auth/parameterName", "SCHEMA_REQUIRED"),
        (
            {"auth": {"type": "QUERY", "parameterName": "a b", "value": {"$secret": "k"}}},
            "/auth/parameterName",
            "SCHEMA_PATTERN",
        ),
        ({"maxRedirects": 50}, "/maxRedirects", "SCHEMA_MAXIMUM"),
        ({"unexpected": 1}, "", "SCHEMA_ADDITIONALPROPERTIES"),
    ],
)
def test_invalid_account_names_the_field(overrides: dict[str, Any], path: str, code: str) -> None:
    result = FACTORY.validate_account(account(**overrides))

    assert not result.ok
    assert issue_paths(result).get(path) == code


def test_allow_list_makes_an_intranet_literal_address_valid() -> None:
    result = FACTORY.validate_account(account(baseUrl="http://10.1.2.3:8080", allowedCidrs=["10.0.0.0/8"]))

    assert result.ok


def test_loopback_base_url_is_valid_only_with_the_factory_test_setting() -> None:
    loopback = account(baseUrl="http://127.0.0.1:9000")

    assert not FACTORY.validate_account(loopback).ok
    assert HttpProviderFactory(allow_loopback_for_tests=True).validate_account(loopback).ok


@pytest.mark.parametrize(
    ("overrides", "path", "code"),
    [
        ({"method": "TRACE"}, "/method", "SCHEMA_ENUM"),
        ({"path": "notify"}, "/path", "SCHEMA_PATTERN"),
        ({"path": "/a/../admin"}, "/path", "DOT_SEGMENT"),
        ({"path": "/users/ {{id}}"}, "/path", "SCHEMA_PATTERN"),
        ({"path": "/users/{{ id + 1 }}"}, "/path", "TEMPLATE_INVALID"),
        ({"bodyTemplate": '{"a":"{{a.__class__}}"}'}, "/bodyTemplate", "TEMPLATE_INVALID"),
        ({"headers": {"X-Id": "{{ id + 1 }}"}}, "/headers/X-Id", "TEMPLATE_INVALID"),
        ({"headers": {"Content-Length": "1"}}, "/headers/Content-Length", "HEADER_FORBIDDEN"),
        ({"headers": {"Bad Name": "x"}}, "/headers/Bad Name", "INVALID_HEADER_NAME"),
        ({"headers": {"Content-Type": "{{ct}}"}}, "/headers/Content-Type", "TEMPLATE_NOT_ALLOWED"),
        ({"successCondition": {"jsonPath": "$..ok"}}, "/successCondition/jsonPath", "JSONPATH_INVALID"),
        ({"successCondition": {"equals": True}}, "/successCondition", "SCHEMA_DEPENDENTREQUIRED"),
        ({"successCondition": {"status": []}}, "/successCondition/status", "SCHEMA_MINITEMS"),
        ({"method": "GET", "bodyTemplate": "x"}, "/bodyTemplate", "BODY_NOT_ALLOWED"),
        ({"responseBodyMaxBytes": -1}, "/responseBodyMaxBytes", "SCHEMA_MINIMUM"),
        # A message's fixed values are plain content too; credentials belong to the account's auth.
        ({"headers": {"Authorization": "Bearer t-1"}}, "/headers/Authorization", "CREDENTIALS_IN_HEADER"),
        ({"query": {"access_token": "t-1"}}, "/query/access_token", "CREDENTIALS_IN_QUERY"),
        ({"path": "/n;access_token=abc"}, "/path", "CREDENTIALS_IN_URL"),
        ({"path": "/v1;ApiKey=k/{{id}}"}, "/path", "CREDENTIALS_IN_URL"),
    ],
)
def test_invalid_message_names_the_field(overrides: dict[str, Any], path: str, code: str) -> None:
    result = FACTORY.validate_message(message(**overrides))

    assert not result.ok
    assert issue_paths(result).get(path) == code


@pytest.mark.parametrize("path", ["/users/{{ id }}", "/users/{{id}}/{{ city }}", "/{a}/x{", "/a}b"])
def test_a_path_placeholder_may_be_spaced_like_in_every_other_template(path: str) -> None:
    # The template language strips the spaces around a name; only the path's pattern used to refuse them.
    assert FACTORY.validate_message(message(path=path)) == ValidationResult.valid()


def test_the_path_pattern_stays_linear_on_many_empty_placeholders() -> None:
    # Each "{{}}" could also be read as four literal characters; an ambiguous pattern would
    # backtrack 2**n ways before refusing the trailing space.
    result = FACTORY.validate_message(message(path="/" + "{{}}" * 500 + " "))

    assert issue_paths(result).get("/path") == "SCHEMA_PATTERN"


def test_query_auth_and_ordinary_query_parameters_are_valid() -> None:
    query_auth = account(
        baseUrl="https://oapi.example.com/robot/send?lang=zh",
        auth={"type": "QUERY", "parameterName": "access_token", "value": {"$secret": "robot-token"}},
    )
    per_recipient = message(query={"token": "{{ recipient_token }}", "page": "1"})

    assert FACTORY.validate_account(query_auth) == ValidationResult.valid()
    assert FACTORY.validate_message(per_recipient) == ValidationResult.valid()


def test_non_json_document_is_a_structured_issue() -> None:
    document = ConfigDocument("wepush.http/account", "1", "application/json", b"{not json")

    result = FACTORY.validate_account(document)

    assert not result.ok
    assert result.issues[0].code == "NOT_JSON"


def test_every_schema_violation_is_reported_at_once() -> None:
    result = FACTORY.validate_account(account(connectTimeout="soon", maxRedirects=-1, tlsVerify="yes"))

    assert set(issue_paths(result)) >= {"/connectTimeout", "/maxRedirects", "/tlsVerify"}


@pytest.mark.parametrize(
    "overrides",
    [
        {"auth": "sk-live-0123456789abcdef"},
        {"auth": {"type": "BEARER", "token": "sk-live-0123456789abcdef"}},
        {"tlsVerify": "sk-live-0123456789abcdef"},
    ],
)
def test_a_schema_violation_names_the_rule_without_quoting_the_value(overrides: dict[str, Any]) -> None:
    result = FACTORY.validate_account(account(**overrides))

    assert not result.ok
    for found in result.issues:
        assert "sk-live" not in found.message, found


def test_harmless_path_and_semicolon_parameters_are_accepted() -> None:
    result = FACTORY.validate_account(
        account(baseUrl="https://api.example.com/v1;v=2/send?lang=zh;region=cn")
    )
    assert result.ok, result.issues


def test_a_message_path_with_harmless_parameters_is_accepted() -> None:
    result = FACTORY.validate_message(message(path="/v1;lang=zh/users/{{id}}"))
    assert result.ok, result.issues
