"""Uploads and the instance's orderly stop, in process (the real ``wepush serve`` under SIGTERM is
tests/integration/service/test_stopped_upload.py): told of the stop, an upload waiting for a slow client
ends at once, FAILED and answered 503; an upload that arrives after it is refused before it claims its
import; and an upload cancelled all the same (no word of the stop) still leaves its import FAILED."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace, service
from tests.integration.api._support_content import create_audience, expect, import_url, start_import, upload


async def _stalling(stalled: asyncio.Event) -> AsyncIterator[bytes]:
    yield b"mobile,name\n"
    yield b"".join(b"1380000%04d,n\n" % i for i in range(500))
    stalled.set()
    await asyncio.Event().wait()  # a client that has gone quiet (never sends the rest)
    yield b""  # pragma: no cover


async def _new_import(app: RunningApp) -> tuple[str, str, str]:
    ws = await default_workspace(app)
    audience = await create_audience(app, ws)
    started = await start_import(app, ws, audience["id"], itemIdField="mobile")
    return ws, audience["id"], started["id"]


def _stop_uploads(app: RunningApp) -> None:
    app.runtime.services.require_started().resources.imports.stop_uploads()


async def test_the_stop_ends_an_upload_waiting_for_its_client_with_503_and_a_failed_import(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wepush")
    async with service(tmp_path) as app:
        ws, audience_id, import_id = await _new_import(app)
        stalled = asyncio.Event()
        sending = asyncio.create_task(upload(app, ws, audience_id, import_id, _stalling(stalled)))
        await asyncio.wait_for(stalled.wait(), 30)
        await asyncio.sleep(0.2)  # the Service is now waiting for the next chunk
        _stop_uploads(app)
        answer = await asyncio.wait_for(sending, 10)
        found = expect(await app.client.get(import_url(ws, audience_id, import_id), headers=app.admin()), 200)
        events = expect(
            await app.client.get(
                f"/api/v1/workspaces/{ws}/audit-events", headers=app.admin(), params={"resourceId": import_id}
            ),
            200,
        )["items"]

    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["code"] == "SERVICE_NOT_READY"
    assert found["state"] == "FAILED"
    assert "shut down" in found["failureReason"]
    stopped = [e for e in events if e["details"].get("summary") == "the upload was stopped"]
    assert [(e["actor"]["type"], e["outcome"]) for e in stopped] == [("SYSTEM", "FAILED")]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    logged = [r for r in caplog.records if getattr(r, "event", None) == "IMPORT_UPLOAD_STOPPED"]
    assert [r.levelno for r in logged] == [logging.WARNING]


async def test_an_upload_after_the_stop_leaves_its_import_waiting_for_the_file(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws, audience_id, import_id = await _new_import(app)
        _stop_uploads(app)
        answer = await upload(app, ws, audience_id, import_id, b"mobile,name\n13800000001,a\n")
        found = expect(await app.client.get(import_url(ws, audience_id, import_id), headers=app.admin()), 200)

    assert (answer.status_code, answer.json()["code"]) == (503, "SERVICE_NOT_READY")
    assert "nothing was received" in answer.json()["detail"]
    assert found["state"] == "CREATED"


async def test_an_upload_cancelled_without_word_of_the_stop_still_fails_its_import(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        ws, audience_id, import_id = await _new_import(app)
        stalled = asyncio.Event()
        # In process, the app runs in the client's task: cancelling it cancels the upload, as uvicorn
        # does once its graceful-shutdown time has run out.
        sending = asyncio.create_task(upload(app, ws, audience_id, import_id, _stalling(stalled)))
        await asyncio.wait_for(stalled.wait(), 30)
        await asyncio.sleep(0.2)
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        found = expect(await app.client.get(import_url(ws, audience_id, import_id), headers=app.admin()), 200)

    assert found["state"] == "FAILED"
    assert "shut down" in found["failureReason"]
