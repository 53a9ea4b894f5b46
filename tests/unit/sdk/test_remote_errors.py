"""Problem documents map to typed errors by code, then by status; secrets never reach messages."""

from __future__ import annotations

import json

import pytest

from wepush.sdk.remote import (
    AccessDenied,
    AuthenticationRequired,
    Conflict,
    CursorExpired,
    IdempotencyConflict,
    NotFound,
    ProblemError,
    RateLimited,
    ResourceInUse,
    RunStateConflict,
    ServiceUnavailable,
    ValidationFailed,
    VersionConflict,
    WePushClient,
    WePushError,
)
from wepush.sdk.remote._errors import problem_error_from_response


def body(code: str, status: int, **extra: object) -> bytes:
    return json.dumps({"type": "about:blank", "title": "T", "status": status, "code": code, **extra}).encode()


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("VALIDATION_FAILED", 400, ValidationFailed),
        ("CONFIRMATION_REQUIRED", 400, ValidationFailed),
        ("PROVIDER_CONFIG_INVALID", 422, ValidationFailed),
        ("IMPORT_LIMIT_EXCEEDED", 422, ValidationFailed),
        ("AUTHENTICATION_REQUIRED", 401, AuthenticationRequired),
        ("ACCESS_DENIED", 403, AccessDenied),
        ("RESOURCE_NOT_FOUND", 404, NotFound),
        ("VERSION_CONFLICT", 409, VersionConflict),
        ("IDEMPOTENCY_CONFLICT", 409, IdempotencyConflict),
        ("RUN_STATE_CONFLICT", 409, RunStateConflict),
        ("RESOURCE_IN_USE", 409, ResourceInUse),
        ("CONFIRMATION_INVALID", 409, Conflict),
        ("LEASE_EXPIRED", 409, Conflict),
        ("CURSOR_EXPIRED", 410, CursorExpired),
        ("RATE_LIMITED", 429, RateLimited),
        ("PROVIDER_NOT_AVAILABLE", 503, ServiceUnavailable),
        ("AGENT_NOT_AVAILABLE", 503, ServiceUnavailable),
        ("SERVICE_NOT_READY", 503, ServiceUnavailable),
        ("INTERNAL_ERROR", 500, ProblemError),
        ("NOT_IMPLEMENTED", 501, ProblemError),
    ],
)
def test_code_selects_the_exception_class(code: str, status: int, expected: type[ProblemError]) -> None:
    error = problem_error_from_response(status, body(code, status))

    assert type(error) is expected
    assert error.code == code
    assert error.status == status
    assert isinstance(error, WePushError)


@pytest.mark.parametrize(
    ("status", "expected"),
    [(404, NotFound), (409, Conflict), (429, RateLimited), (503, ServiceUnavailable), (418, ProblemError)],
)
def test_unknown_code_falls_back_to_the_status_family(status: int, expected: type[ProblemError]) -> None:
    error = problem_error_from_response(status, body("SOMETHING_NEW", status))

    assert type(error) is expected
    assert error.code == "SOMETHING_NEW"


def test_non_problem_body_keeps_status_and_gets_an_http_code() -> None:
    error = problem_error_from_response(503, b"<html>maintenance</html>", retry_after=7.0)

    assert isinstance(error, ServiceUnavailable)
    assert (error.code, error.title, error.retry_after) == ("HTTP_503", "HTTP 503", 7.0)
    assert "<html>" not in str(error)


def test_problem_details_are_carried() -> None:
    error = problem_error_from_response(
        409,
        body(
            "RUN_STATE_CONFLICT",
            409,
            detail="Run cannot be paused from SUCCEEDED",
            traceId="t-1",
            currentState="SUCCEEDED",
            allowedCommands=["RESUME", 7],
            errors=[{"field": "x", "code": "REQUIRED", "message": "m"}, "junk"],
        ),
    )

    assert isinstance(error, RunStateConflict)
    assert error.current_state == "SUCCEEDED"
    assert error.allowed_commands == ("RESUME",)
    assert [(e.field, e.code, e.message) for e in error.errors] == [("x", "REQUIRED", "m")]
    assert (
        str(error)
        == "409 RUN_STATE_CONFLICT: T - Run cannot be paused from SUCCEEDED; x: m (REQUIRED) (traceId t-1)"
    )
    assert repr(error) == "RunStateConflict(status=409, code='RUN_STATE_CONFLICT', trace_id='t-1')"


def test_allowed_range_is_read_only_when_well_formed() -> None:
    good = problem_error_from_response(400, body("VALIDATION_FAILED", 400, allowedRange={"min": 1, "max": 9}))
    bad = problem_error_from_response(400, body("VALIDATION_FAILED", 400, allowedRange={"min": "1"}))

    assert isinstance(good, ValidationFailed)
    assert good.allowed_range == (1, 9)
    assert isinstance(bad, ValidationFailed)
    assert bad.allowed_range is None


def test_long_detail_is_truncated() -> None:
    error = problem_error_from_response(400, body("VALIDATION_FAILED", 400, detail="x" * 10_000))

    assert error.detail is not None
    assert len(error.detail) == 512


def test_client_repr_never_shows_the_token() -> None:
    secret = "wp_live_do-not-print"
    with WePushClient("http://127.0.0.1:9", secret) as client:
        assert secret not in repr(client)
        assert secret not in repr(client.workspace("ws-1"))
        assert secret not in repr(vars(client))


@pytest.mark.parametrize(
    "endpoint",
    ["ftp://example.com", "wepush.example.com", "https://user:pw@example.com", "https://example.com/?a=1"],
)
def test_unusable_endpoints_are_rejected(endpoint: str) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        WePushClient(endpoint, "token")


@pytest.mark.parametrize("token", ["", "abc\r\nX-Evil: 1"])
def test_unusable_tokens_are_rejected_without_echoing_them(token: str) -> None:
    with pytest.raises(WePushError) as raised:
        WePushClient("http://127.0.0.1:9", token)

    assert "X-Evil" not in str(raised.value)


def test_the_message_names_the_fields_that_broke_a_rule() -> None:
    errors = [{"field": f"/config/f{i}", "code": "REQUIRED", "message": "is required"} for i in range(7)]
    error = problem_error_from_response(
        422, body("VALIDATION_FAILED", 422, detail="The account configuration is invalid.", errors=errors)
    )

    assert str(error) == (
        "422 VALIDATION_FAILED: T - The account configuration is invalid.; "
        + "; ".join(f"/config/f{i}: is required (REQUIRED)" for i in range(5))
        + "; and 2 more"
    )
    assert len(error.errors) == 7
