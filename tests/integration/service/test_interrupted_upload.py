"""An upload whose Service process dies mid-file is FAILED when that instance starts again.

Before, such an import stayed STAGING for 24 hours, with its partial rows, and every retry of the
upload was refused as if the file were still arriving.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.helpers_process import ServiceProcess, free_port, running_service, wait_for

ROWS_BEFORE_STALL = 15_000  # more than one staging batch reaches the database before the stall


def _admin(service: ServiceProcess) -> httpx.Client:
    token = (service.data_dir / "bootstrap-admin.token").read_text().strip()
    return httpx.Client(
        base_url=service.base_url + "/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _stalling_file(stalled: threading.Event, released: threading.Event) -> Iterator[bytes]:
    yield b"mobile,name\n"
    for start in range(0, ROWS_BEFORE_STALL, 1000):
        yield "".join(f"1380{n:07d},n{n}\n" for n in range(start, start + 1000)).encode()
    stalled.set()
    released.wait(60)  # the process is killed meanwhile; the client then sees the connection drop
    yield b""


def _start_import(client: httpx.Client) -> tuple[str, str, str]:
    workspace_id = client.get("/workspaces").json()["items"][0]["id"]
    audience_id = client.post(f"/workspaces/{workspace_id}/audiences", json={"name": "customers"}).json()[
        "id"
    ]
    created = client.post(
        f"/workspaces/{workspace_id}/audiences/{audience_id}/imports",
        json={"format": "CSV", "itemIdField": "mobile", "fieldMapping": {"mobile": "mobile", "name": "name"}},
    )
    assert created.status_code == 201, created.text
    return workspace_id, audience_id, created.json()["id"]


def _staged_rows(data_dir: Path, import_id: str) -> int:
    with sqlite3.connect(data_dir / "wepush-next.db") as db:
        (count,) = db.execute(
            "SELECT count(*) FROM audience_import_row WHERE import_id = ?", (import_id,)
        ).fetchone()
    return int(count)


def test_an_upload_cut_off_by_a_killed_instance_fails_when_it_starts_again(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    stalled, released = threading.Event(), threading.Event()
    with running_service(data_dir, port=port) as service, _admin(service) as client:
        workspace_id, audience_id, import_id = _start_import(client)
        path = f"/workspaces/{workspace_id}/audiences/{audience_id}/imports/{import_id}"

        def upload() -> None:
            with contextlib.suppress(httpx.TransportError):  # the Service dies under the request
                client.put(
                    path + "/content",
                    content=_stalling_file(stalled, released),
                    headers={"Content-Type": "text/csv"},
                )

        sender = threading.Thread(target=upload, daemon=True)
        sender.start()
        assert stalled.wait(60)
        wait_for("a staged batch", lambda: _staged_rows(data_dir, import_id) > 0)
        assert client.get(path).json()["state"] == "STAGING"
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.wait(10)
        released.set()
        sender.join(30)

    # Another instance name (another instance's restart) leaves the upload alone: it may be receiving.
    other = {"WEPUSH_AGENT_EMBEDDED_NAME": "other"}
    with running_service(data_dir, port=port, extra_env=other) as service, _admin(service) as client:
        assert client.get(path).json()["state"] == "STAGING"

    with running_service(data_dir, port=port) as service, _admin(service) as client:
        failed = client.get(path).json()
        assert failed["state"] == "FAILED"
        assert "interrupted" in failed["failureReason"]
        assert failed["counts"]["acceptedRows"] == 0
        assert _staged_rows(data_dir, import_id) == 0
        retry = client.put(
            path + "/content", content=b"mobile,name\n1,a\n", headers={"Content-Type": "text/csv"}
        )
        assert (retry.status_code, retry.json()["code"]) == (409, "IMPORT_STATE_CONFLICT")
        events = client.get(
            f"/workspaces/{workspace_id}/audit-events", params={"resourceId": import_id}
        ).json()["items"]
        interrupted = [e for e in events if e["details"].get("summary") == "the upload was interrupted"]
        assert [(e["actor"]["type"], e["outcome"]) for e in interrupted] == [("SYSTEM", "FAILED")]
    assert "IMPORT_UPLOADS_INTERRUPTED" in service.log()
