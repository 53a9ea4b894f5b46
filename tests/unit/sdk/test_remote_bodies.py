"""Request bodies given as mappings are checked as the Service would check them, without quoting values."""

from __future__ import annotations

from typing import Any

import pytest

from wepush.sdk.remote import InvalidRequest, WePushError
from wepush.sdk.remote._support import as_model
from wepush.sdk.remote._validation import build
from wepush_client.models import (
    AccountCreate,
    AccountUpdate,
    ApiTokenCreate,
    AudienceCreate,
    AudienceImportCreate,
    ChangeConcurrencyRequest,
    ExecutionPolicies,
    JobCreate,
    JobUpdate,
    MessageCreate,
    WorkspaceCreate,
)

SECRET = "LEAKME-sk-live-123456"

JOB: dict[str, Any] = {
    "name": "journey",
    "accountId": "acc-1",
    "messageId": "msg-1",
    "messageRevision": 1,
    "audienceSnapshotId": "snap-1",
    "policies": {"concurrency": {"min": 1, "max": 8, "target": 2}},
}


def _refusal(model: Any, body: dict[str, Any]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as raised:
        as_model(model, body)
    return raised.value


def _fields(error: InvalidRequest) -> list[tuple[str, str]]:
    """Where each refusal is and the rule it names; the code is always the Service's ``INVALID``."""
    assert {e.code for e in error.errors} == {"INVALID"}
    return [(e.field, e.message) for e in error.errors]


# Bodies the SDK tests and the first-journey e2e test send: the checks must let them all through.
LEGITIMATE: list[tuple[Any, dict[str, Any]]] = [
    (
        AccountCreate,
        {
            "name": "local vendor",
            "providerId": "wepush.http",
            "config": {
                "baseUrl": "http://127.0.0.1:1",
                "auth": {"type": "BEARER", "token": {"$secret": "t"}},
            },
            "secrets": {"t": {"operation": "REPLACE", "value": SECRET}},
        },
    ),
    (
        AccountUpdate,
        {"name": "renamed", "config": {}, "secrets": {"t": {"operation": "KEEP"}}, "version": 1},
    ),
    (
        MessageCreate,
        {
            "name": "notice",
            "providerId": "wepush.http",
            "content": {
                "method": "POST",
                "path": "/notify",
                "headers": {"Content-Type": "application/json"},
                "bodyTemplate": '{"to":"{{mobile}}"}',
                "successCondition": {"status": [200], "jsonPath": "$.success", "equals": True},
            },
        },
    ),
    (AudienceCreate, {"name": "everyone"}),
    (
        AudienceImportCreate,
        {"format": "CSV", "hasHeader": True, "fieldMapping": {"mobile": "mobile", "name": "name"}},
    ),
    (AudienceImportCreate, {"format": "TXT", "fieldMapping": {"1": "mobile"}}),
    (JobCreate, JOB),
    (JobCreate, {**JOB, "description": None}),
    (WorkspaceCreate, {"name": "team"}),
    (ApiTokenCreate, {"name": "ci", "role": "OPERATOR"}),
]


@pytest.mark.parametrize(("model", "body"), LEGITIMATE)
def test_legitimate_bodies_become_their_models(model: Any, body: dict[str, Any]) -> None:
    assert isinstance(as_model(model, body), model)


def test_a_misspelt_top_level_key_is_refused_by_its_pointer() -> None:
    error = _refusal(
        AudienceImportCreate,
        {"format": "CSV", "hasHeader": True, "itemIdFeild": "mobile", "fieldMapping": {"mobile": "mobile"}},
    )

    assert _fields(error) == [("/itemIdFeild", "is not a field of this body")]
    assert "/itemIdFeild" in str(error)


def test_misspelt_nested_keys_are_all_named() -> None:
    body = {**JOB, "descripton": "typo", "policies": {"concurency": {"min": 1, "max": 2, "target": 1}}}

    error = _refusal(JobCreate, body)

    assert sorted(_fields(error)) == [
        ("/descripton", "is not a field of this body"),
        ("/policies/concurency", "is not a field of this body"),
    ]


def test_an_unknown_key_inside_a_secret_operation_is_refused_without_its_value() -> None:
    body = {
        "name": "a",
        "providerId": "wepush.http",
        "config": {"token": {"$secret": "t"}},
        "secrets": {"t": {"operation": "REPLACE", "value": "x", "comment": SECRET}},
    }

    error = _refusal(AccountCreate, body)

    assert _fields(error) == [("/secrets/t/comment", "is not a field of this body")]
    assert SECRET not in str(error)


def test_free_form_objects_keep_any_key() -> None:
    body = {"name": "a", "providerId": "wepush.http", "config": {"anything": {"nested": [{"deep": 1}]}}}

    assert as_model(AccountCreate, body).config == body["config"]


def test_a_secret_of_the_wrong_shape_is_refused_by_location_without_the_value() -> None:
    body = {"name": "a", "providerId": "wepush.http", "config": {}, "secrets": {"token": SECRET}}

    error = _refusal(AccountCreate, body)

    assert _fields(error) == [("/secrets/token", 'must satisfy type="object"')]
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert error.__context__ is None


def test_a_nested_rule_is_located_below_the_body_root() -> None:
    error = _refusal(JobCreate, {**JOB, "policies": {"concurrency": {"min": SECRET, "max": 2, "target": 1}}})

    assert _fields(error) == [("/policies/concurrency/min", 'must satisfy type="integer"')]
    assert SECRET not in str(error)


def test_missing_fields_are_called_required() -> None:
    error = _refusal(JobUpdate, {"version": 1, "name": "x"})

    assert ("/accountId", "is required") in _fields(error)


def test_a_bad_value_is_not_quoted() -> None:
    error = _refusal(ApiTokenCreate, {"name": "ci", "role": SECRET})

    assert [field for field, _ in _fields(error)] == ["/role"]
    assert SECRET not in str(error)
    assert error.__context__ is None


def test_the_refusal_is_a_value_error_and_a_wepush_error() -> None:
    error = _refusal(WorkspaceCreate, {"nmae": "team"})

    assert isinstance(error, ValueError)
    assert isinstance(error, WePushError)


def test_a_model_instance_passes_unchanged() -> None:
    policies = ExecutionPolicies.from_dict({"concurrency": {"min": 1, "max": 2, "target": 1}})

    assert as_model(ExecutionPolicies, policies) is policies


def test_bodies_the_sdk_assembles_are_refused_by_argument_name() -> None:
    with pytest.raises(InvalidRequest) as raised:
        build(ChangeConcurrencyRequest, target=SECRET)

    assert _fields(raised.value) == [("target", 'must satisfy type="integer"')]
    assert SECRET not in str(raised.value)
