"""A call's own ``timeout`` replaces the client's ``request_timeout`` for a transfer that needs longer."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from wepush.sdk.remote import TransportError, WePushClient

from ._service import TOKEN, WS, Action, ScriptedService, reply, ws_path

CONTENT = ws_path("audiences", "aud-1", "imports", "imp-1", "content")
ERRORS = ws_path("audiences", "aud-1", "imports", "imp-1", "errors")
COMMIT = ws_path("audiences", "aud-1", "imports", "imp-1", "commit")
ARTIFACT = ws_path("runs", "run-1", "artifacts", "art-1", "content")
#: Longer than the impatient client's request_timeout, far shorter than the calls' own timeout.
ANSWER_DELAY = 0.6


def staged_import() -> dict[str, Any]:
    return {
        "id": "imp-1",
        "audienceId": "aud-1",
        "state": "STAGED",
        "format": "CSV",
        "hasHeader": True,
        "delimiter": ",",
        "encoding": "utf-8",
        "fieldMapping": {"Mobile": "mobile"},
        "dedupeKeys": ["mobile"],
        "counts": {"totalRows": 1, "acceptedRows": 1, "rejectedRows": 0, "duplicateRows": 0},
        "createdAt": "2026-08-22T08:30:00Z",
        "updatedAt": "2026-08-22T08:30:00Z",
        "expiresAt": "2026-08-23T08:30:00Z",
    }


def snapshot() -> dict[str, Any]:
    return {
        "id": "snap-1",
        "audienceId": "aud-1",
        "revision": 1,
        "recipientCount": 1,
        "fields": ["mobile"],
        "checksum": "0" * 64,
        "sourceImportId": "imp-1",
        "createdAt": "2026-08-22T08:31:00Z",
    }


def late(then: Action) -> Action:
    """Read the whole request, then think for longer than the client's request_timeout."""

    async def action(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(ANSWER_DELAY)
        return await then(request)

    return action


async def _csv(request: web.Request) -> web.StreamResponse:
    return web.Response(body=b"lineNumber,code\n", content_type="text/csv")


async def _jsonl(request: web.Request) -> web.StreamResponse:
    return web.Response(body=b'{"itemId":"i-1"}\n', content_type="application/x-ndjson")


@pytest.fixture
def impatient(service: ScriptedService) -> Iterator[WePushClient]:
    # No retries: a timed-out GET or keyed POST would otherwise be sent again and mask the timeout.
    with WePushClient(service.endpoint, TOKEN, request_timeout=0.2, max_retries=0) as client:
        yield client


#: (method, path, the Service's answer, the call with a given timeout)
CALLS: dict[str, tuple[str, str, Action, Callable[[WePushClient, float | None], Any]]] = {
    "upload": (
        "PUT",
        CONTENT,
        reply(200, staged_import()),
        lambda c, t: c.workspace(WS).audiences.upload("aud-1", "imp-1", b"Mobile\n13800000001\n", timeout=t),
    ),
    "commit": (
        "POST",
        COMMIT,
        reply(201, snapshot()),
        lambda c, t: c.workspace(WS).audiences.commit_import("aud-1", "imp-1", version=1, timeout=t),
    ),
    "errors download": (
        "GET",
        ERRORS,
        _csv,
        lambda c, t: c.workspace(WS).audiences.download_errors("aud-1", "imp-1", io.BytesIO(), timeout=t),
    ),
    "artifact download": (
        "GET",
        ARTIFACT,
        _jsonl,
        lambda c, t: c.workspace(WS).runs.download_artifact("run-1", "art-1", io.BytesIO(), timeout=t),
    ),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_a_slow_answer_times_out_under_the_client_timeout(
    service: ScriptedService, impatient: WePushClient, case: str
) -> None:
    method, path, answer, call = CALLS[case]
    service.script(method, path, late(answer))

    with pytest.raises(TransportError) as raised:
        call(impatient, None)

    assert "Timeout" in raised.value.reason


@pytest.mark.parametrize("case", sorted(CALLS))
def test_the_calls_own_timeout_waits_for_the_slow_answer(
    service: ScriptedService, impatient: WePushClient, case: str
) -> None:
    method, path, answer, call = CALLS[case]
    service.script(method, path, late(answer))

    call(impatient, 10.0)

    assert len(service.seen(method, path)) == 1


@pytest.mark.parametrize("case", sorted(CALLS))
@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan")])
def test_a_timeout_that_is_no_wait_is_refused_before_anything_is_sent(
    service: ScriptedService, impatient: WePushClient, case: str, timeout: float
) -> None:
    call = CALLS[case][3]

    with pytest.raises(ValueError, match="timeout"):
        call(impatient, timeout)

    assert service.requests == []
