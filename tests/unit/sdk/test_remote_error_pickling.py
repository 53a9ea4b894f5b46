"""SDK errors survive pickling (multiprocessing, task queues) and copying with everything they carry."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from wepush.sdk.remote import (
    FieldError,
    InvalidRequest,
    InvalidResponse,
    NotFound,
    RateLimited,
    RunStateConflict,
    TransportError,
    ValidationFailed,
    WePushError,
)
from wepush.sdk.remote._errors import problem_error_from_response


def _problem(status: int, code: str, **extra: object) -> bytes:
    return json.dumps(
        {"type": "about:blank", "title": "T", "status": status, "code": code, "traceId": "t-1", **extra}
    ).encode()


ERRORS: list[WePushError] = [
    problem_error_from_response(404, _problem(404, "RESOURCE_NOT_FOUND", detail="no such account")),
    problem_error_from_response(429, _problem(429, "RATE_LIMITED"), retry_after=7.0),
    problem_error_from_response(
        409, _problem(409, "RUN_STATE_CONFLICT", currentState="RUNNING", allowedCommands=["PAUSE"])
    ),
    problem_error_from_response(
        400,
        _problem(400, "VALIDATION_FAILED", errors=[{"field": "/name", "code": "REQUIRED", "message": "m"}]),
    ),
    TransportError("ConnectError", method="GET", path="/api/v1/workspaces", attempts=4),
    InvalidRequest("JobCreate body", [FieldError(field="/descripton", code="unknown_field", message="m")]),
    InvalidResponse("the Service returned the same page cursor twice"),
]


def _same(left: WePushError, right: WePushError) -> None:
    assert type(left) is type(right)
    assert str(left) == str(right)
    assert repr(left) == repr(right)
    assert {k: v for k, v in vars(left).items() if not k.startswith("__")} == {
        k: v for k, v in vars(right).items() if not k.startswith("__")
    }


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_errors_round_trip_through_pickle(error: WePushError) -> None:
    _same(pickle.loads(pickle.dumps(error)), error)


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_errors_can_be_copied(error: WePushError) -> None:
    _same(copy.copy(error), error)
    _same(copy.deepcopy(error), error)


def test_a_restored_error_keeps_its_typed_details() -> None:
    limited = pickle.loads(pickle.dumps(ERRORS[1]))
    conflict = pickle.loads(pickle.dumps(ERRORS[2]))
    invalid = pickle.loads(pickle.dumps(ERRORS[3]))

    assert isinstance(limited, RateLimited)
    assert limited.retry_after == 7.0
    assert isinstance(conflict, RunStateConflict)
    assert (conflict.current_state, conflict.allowed_commands) == ("RUNNING", ("PAUSE",))
    assert isinstance(invalid, ValidationFailed)
    assert invalid.errors == (FieldError(field="/name", code="REQUIRED", message="m"),)
    assert isinstance(pickle.loads(pickle.dumps(ERRORS[0])), NotFound)
