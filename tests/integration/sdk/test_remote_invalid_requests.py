"""A request that breaks the contract is refused before it is sent, as a typed error quoting no value."""

from __future__ import annotations

import logging
import pickle
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from wepush.sdk.remote import InvalidRequest, WePushClient, WorkspaceClient

from ._service import WS, ScriptedService

SECRET = "LEAKME-sk-live-123456"
# Values of the wrong type, as an untyped caller could pass them.
NOT_A_STRING: Any = SECRET.encode()
NOT_A_NUMBER: Any = SECRET
JOB = {
    "name": "j",
    "accountId": "acc-1",
    "messageId": "msg-1",
    "messageRevision": 1,
    "audienceSnapshotId": "snap-1",
}

CASES: dict[str, tuple[Callable[[WorkspaceClient], Any], list[str]]] = {
    "secret of the wrong shape": (
        lambda ws: ws.accounts.create(
            {"name": "a", "providerId": "wepush.http", "config": {}, "secrets": {"token": SECRET}}
        ),
        ["/secrets/token"],
    ),
    "misspelt import setting": (
        lambda ws: ws.audiences.create_import(
            "aud-1",
            {"format": "CSV", "hasHeader": True, "itemIdFeild": "mobile", "fieldMapping": {"m": "mobile"}},
        ),
        ["/itemIdFeild"],
    ),
    "misspelt nested policy": (
        lambda ws: ws.jobs.create({**JOB, "policies": {"concurency": {"min": 1, "max": 1, "target": 1}}}),
        ["/policies/concurency"],
    ),
    "incomplete update": (lambda ws: ws.jobs.update("job-1", {"version": 1, "name": "x"}), ["/accountId"]),
    "page size above the limit": (lambda ws: ws.accounts.list(limit=500), ["limit"]),
    "page size zero": (lambda ws: list(ws.accounts.iterate(page_size=0)), ["limit"]),
    "empty positional identifier": (lambda ws: ws.accounts.get(""), ["account_id"]),
    "identifier of the wrong type": (lambda ws: ws.runs.get(NOT_A_STRING), ["run_id"]),
    "concurrency that is no number": (
        lambda ws: ws.runs.change_concurrency("run-1", NOT_A_NUMBER),
        ["target"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_request_is_refused_before_it_is_sent(
    service: ScriptedService, client: WePushClient, case: str
) -> None:
    call, fields = CASES[case]

    with pytest.raises(InvalidRequest) as raised:
        call(client.workspace(WS))

    error = raised.value
    assert isinstance(error, ValueError)
    for field in fields:
        assert field in [e.field for e in error.errors]
        assert field in str(error)
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert error.__context__ is None
    assert service.requests == []


def _chain(error: BaseException) -> list[BaseException]:
    """The error and every error a traceback printer or error tracker would show with it."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


ACCOUNT_CONFIG = {"baseUrl": "https://api.example.com", "auth": {"type": "BEARER", "token": {"$secret": "t"}}}
# Long enough that pydantic's own error quotes its first and last characters (input_value='TOPSECRET-xx...').
LONG_SECRET = {"t": {"operation": "REPLACE", "value": "TOPSECRET-" + "x" * 70_000}}
SECRET_BODIES: dict[str, Callable[[WorkspaceClient], Any]] = {
    "create": lambda ws: ws.accounts.create(
        {"name": "a", "providerId": "wepush.http", "config": ACCOUNT_CONFIG, "secrets": LONG_SECRET}
    ),
    "update": lambda ws: ws.accounts.update(
        "acc-1", {"name": "a", "config": ACCOUNT_CONFIG, "secrets": LONG_SECRET, "version": 1}
    ),
}


@pytest.mark.parametrize("case", sorted(SECRET_BODIES))
def test_a_refused_secret_leaves_no_trace_in_the_error_chain_or_the_logs(
    service: ScriptedService, client: WePushClient, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    with pytest.raises(InvalidRequest) as raised:
        SECRET_BODIES[case](client.workspace(WS))

    error = raised.value
    assert [(e.field, e.message) for e in error.errors] == [
        ("/secrets/t/value", "must satisfy maxLength=65536")
    ]
    assert _chain(error) == [error]
    shown = "".join(traceback.format_exception(error)) + repr(error) + repr(pickle.loads(pickle.dumps(error)))
    assert "TOPSECRET" not in shown
    assert "TOPSECRET" not in caplog.text
    assert service.requests == []
