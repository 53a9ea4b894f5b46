"""Problem documents from the Service become typed exceptions; pagination follows cursors."""

from __future__ import annotations

import pytest
from aiohttp import web

from wepush.sdk.remote import (
    AccessDenied,
    AuthenticationRequired,
    Conflict,
    IdempotencyConflict,
    NotFound,
    ProblemError,
    ResourceInUse,
    RunStateConflict,
    ValidationFailed,
    VersionConflict,
    WePushClient,
)

from ._service import TOKEN, WS, ScriptedService, account, problem, reply, ws_path

ACCOUNT = ws_path("accounts", "acc-1")


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "VALIDATION_FAILED", ValidationFailed),
        (400, "CURSOR_INVALID", ValidationFailed),
        (401, "AUTHENTICATION_REQUIRED", AuthenticationRequired),
        (403, "ACCESS_DENIED", AccessDenied),
        (404, "RESOURCE_NOT_FOUND", NotFound),
        (409, "VERSION_CONFLICT", VersionConflict),
        (409, "IMPORT_STATE_CONFLICT", Conflict),
        (500, "INTERNAL_ERROR", ProblemError),
    ],
)
def test_problem_becomes_typed_exception_with_its_code(
    service: ScriptedService, client: WePushClient, status: int, code: str, expected: type[ProblemError]
) -> None:
    service.script("GET", ACCOUNT, problem(status, code))

    with pytest.raises(expected) as raised:
        client.workspace(WS).accounts.get("acc-1")

    error = raised.value
    assert type(error) is expected
    assert (error.status, error.code) == (status, code)
    assert error.detail == f"scripted {code}"
    assert error.trace_id == "trace-123"
    assert TOKEN not in str(error)
    assert TOKEN not in repr(error)
    assert len(service.seen("GET", ACCOUNT)) == 1


def test_business_conflict_on_a_keyed_post_is_never_retried(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("jobs", "job-1", "runs")
    service.script("POST", path, problem(409, "IDEMPOTENCY_CONFLICT"))

    with pytest.raises(IdempotencyConflict):
        client.workspace(WS).runs.start("job-1", dry_run=True, idempotency_key="reused-key")

    assert len(service.seen("POST", path)) == 1


def test_run_state_conflict_names_the_current_state_and_allowed_commands(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("runs", "run-1", "commands", "pause")
    service.script(
        "POST",
        path,
        problem(409, "RUN_STATE_CONFLICT", currentState="SUCCEEDED", allowedCommands=[]),
    )

    with pytest.raises(RunStateConflict) as raised:
        client.workspace(WS).runs.pause("run-1")

    assert raised.value.current_state == "SUCCEEDED"
    assert raised.value.allowed_commands == ()
    assert isinstance(raised.value, Conflict)


def test_concurrency_outside_range_reports_the_allowed_range_and_field_errors(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("runs", "run-1", "commands", "change-concurrency")
    service.script(
        "POST",
        path,
        problem(
            400,
            "VALIDATION_FAILED",
            allowedRange={"min": 1, "max": 200},
            errors=[{"field": "target", "code": "OUT_OF_RANGE", "message": "must be between 1 and 200"}],
        ),
    )

    with pytest.raises(ValidationFailed) as raised:
        client.workspace(WS).runs.change_concurrency("run-1", 500)

    assert raised.value.allowed_range == (1, 200)
    assert [(e.field, e.code) for e in raised.value.errors] == [("target", "OUT_OF_RANGE")]
    (sent,) = service.seen("POST", path)
    assert sent.body == b'{"target": 500}'


def test_deleting_a_referenced_audience_raises_resource_in_use(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("audiences", "aud-1")
    service.script("DELETE", path, problem(409, "RESOURCE_IN_USE"))

    with pytest.raises(ResourceInUse):
        client.workspace(WS).audiences.delete("aud-1")


def test_an_answer_that_is_not_a_problem_keeps_its_status(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("jobs", "job-1", "run-confirmation")

    async def gateway_page(request: web.Request) -> web.StreamResponse:
        return web.Response(status=502, text="<html>bad gateway</html>", content_type="text/html")

    service.script("POST", path, gateway_page)

    with pytest.raises(ProblemError) as raised:
        client.workspace(WS).jobs.confirm_run("job-1")

    assert (raised.value.status, raised.value.code) == (502, "HTTP_502")


def test_iterate_follows_next_cursor_until_the_last_page(
    service: ScriptedService, client: WePushClient
) -> None:
    path = ws_path("accounts")
    service.script(
        "GET",
        path,
        reply(200, {"items": [account("a1"), account("a2")], "page": {"nextCursor": "c-2", "hasMore": True}}),
        reply(200, {"items": [account("a3")], "page": {"nextCursor": None, "hasMore": False}}),
    )

    names = [
        item.id for item in client.workspace(WS).accounts.iterate(provider_id="wepush.http", page_size=2)
    ]

    assert names == ["a1", "a2", "a3"]
    first, second = service.seen("GET", path)
    assert first.query == {"limit": "2", "providerId": "wepush.http"}
    assert second.query == {"limit": "2", "cursor": "c-2", "providerId": "wepush.http"}


def test_request_body_mapping_is_sent_in_wire_format(service: ScriptedService, client: WePushClient) -> None:
    path = ws_path("accounts")
    service.script("POST", path, reply(201, account("acc-9")))

    created = client.workspace(WS).accounts.create(
        {"name": "primary", "providerId": "wepush.http", "config": {"baseUrl": "https://api.example.com"}}
    )

    assert created.id == "acc-9"
    (sent,) = service.seen("POST", path)
    assert sent.headers["Authorization"] == f"Bearer {TOKEN}"
    assert sent.headers["Idempotency-Key"]
    assert b'"providerId": "wepush.http"' in sent.body
