"""A client that closes its connection in the middle of an upload (a cancelled curl, a proxy timing
out) fails the import, and the Service logs it as the everyday event it is: one INFO line, no ERROR and
no traceback that would set off alerting. Real uvicorn on loopback, a raw socket that stops sending."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.integration.api._support_content import create_audience, expect, import_url, start_import
from tests.integration.api._support_runs import loopback_service


async def test_a_client_that_goes_away_mid_upload_fails_the_import_and_logs_no_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wepush")
    async with loopback_service(tmp_path) as app:
        ws = (await app.client.get("/api/v1/workspaces", headers=app.admin())).json()["items"][0]["id"]
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        url = app.client.base_url
        _reader, writer = await asyncio.open_connection(url.host, url.port)
        path = import_url(ws, audience["id"], started["id"], "content")
        writer.write(
            (
                f"PUT {path} HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Bearer {app.admin_token}\r\n"
                "Content-Type: text/csv\r\nContent-Length: 1000000\r\n\r\nmobile,name\r\n"
            ).encode()
            + b"".join(b"1380000%04d,n\r\n" % i for i in range(500))
        )
        await writer.drain()
        await asyncio.sleep(0.2)  # let the Service start staging what it has, then go away
        writer.close()
        await writer.wait_closed()
        state = ""
        for _ in range(200):
            found = expect(
                await app.client.get(import_url(ws, audience["id"], started["id"]), headers=app.admin()), 200
            )
            state = found["state"]
            if state == "FAILED":
                break
            await asyncio.sleep(0.05)

    assert (state, found["failureReason"]) == ("FAILED", "the upload did not complete")
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == []
    gone = [record for record in caplog.records if getattr(record, "event", None) == "CLIENT_DISCONNECTED"]
    assert len(gone) == 1
    assert gone[0].levelno == logging.INFO
    assert gone[0].exc_info is None
