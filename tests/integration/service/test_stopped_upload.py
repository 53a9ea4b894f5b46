"""An orderly stop (SIGTERM) of the instance receiving an upload ends that upload itself: the import is
FAILED by the time the process has exited, the client is answered 503 SERVICE_NOT_READY (problem+json,
Retry-After), and the log has one line for it, no traceback.

Before, uvicorn cancelled the upload once its graceful-shutdown time ran out: the client got a plain-text
500, the log "Exception in ASGI application" with a CancelledError traceback, and the import stayed
STAGING until the abandoned-upload check or the instance's restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sqlite3
import time
from pathlib import Path

from tests.helpers_process import running_service, wait_for
from tests.integration.service.test_interrupted_upload import _admin, _staged_rows, _start_import

ROWS_BEFORE_STOP = 15_000  # more than one staging batch reaches the database before the stop


def _import_row(data_dir: Path, import_id: str) -> tuple[str, str | None]:
    with sqlite3.connect(data_dir / "wepush-next.db") as db:
        state, reason = db.execute(
            "SELECT state, failure_reason FROM audience_import WHERE id = ?", (import_id,)
        ).fetchone()
    return str(state), reason


def _answer_while_trickling(sock: socket.socket, timeout_s: float) -> bytes:
    """Go on sending a row now and then, as a slow client does, until the Service answers and closes."""
    received = b""
    deadline = time.monotonic() + timeout_s
    n = ROWS_BEFORE_STOP
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], 0.2)
        if readable:
            data = sock.recv(65536)
            if not data:
                return received
            received += data
            continue
        if not received:
            n += 1
            # Once the Service has closed its side, what it answered is still to be read.
            with contextlib.suppress(OSError):
                sock.sendall(f"1380{n:07d},n{n}\n".encode())
    raise AssertionError(f"no complete answer within {timeout_s} s: {received!r}")


def test_sigterm_mid_upload_fails_the_import_and_answers_503(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_service(data_dir) as service, _admin(service) as client:
        workspace_id, audience_id, import_id = _start_import(client)
        path = f"/api/v1/workspaces/{workspace_id}/audiences/{audience_id}/imports/{import_id}"
        token = client.headers["Authorization"]
        head = (
            f"PUT {path}/content HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {token}\r\n"
            "Content-Type: text/csv\r\nContent-Length: 100000000\r\n\r\n"
        )
        rows = "mobile,name\n" + "".join(f"1380{n:07d},n{n}\n" for n in range(ROWS_BEFORE_STOP))
        port = int(service.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(head.encode() + rows.encode())
            wait_for("a staged batch", lambda: _staged_rows(data_dir, import_id) > 0)
            assert _import_row(data_dir, import_id)[0] == "STAGING"
            os.kill(service.process.pid, signal.SIGTERM)
            answer = _answer_while_trickling(sock, timeout_s=30)
        # uvicorn ends an orderly stop by raising the signal it caught again, as its default would.
        assert service.process.wait(30) in (0, -signal.SIGTERM)
        state, reason = _import_row(data_dir, import_id)
        log = service.log()

    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line == b"HTTP/1.1 503 Service Unavailable", answer
    assert b"content-type: application/problem+json" in headers.lower()
    assert b"retry-after: 5" in headers.lower()
    problem = json.loads(body)
    assert problem["code"] == "SERVICE_NOT_READY"
    assert "Start a new import" in problem["detail"]

    assert state == "FAILED"
    assert reason is not None
    assert "shut down" in reason
    assert "start a new import" in reason
    assert "IMPORT_UPLOAD_STOPPED" in log
    assert "Traceback" not in log
    assert "Exception in ASGI application" not in log
    assert "timeout graceful shutdown exceeded" not in log
