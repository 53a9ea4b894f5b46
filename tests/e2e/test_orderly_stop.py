"""An orderly stop (SIGTERM) while a client follows a run over SSE: the stream ends at once and the stop
takes the embedded agent's drain, not that plus uvicorn's graceful-shutdown timeout ending in a cancelled
request's traceback."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx
import pytest

from tests.e2e._vendor import running_vendor
from tests.e2e.test_first_journey import SECRET, _prepare, service_and_client
from tests.helpers_process import free_port, wait_for


@pytest.mark.slow
def test_sigterm_ends_open_event_streams_and_drains_without_a_traceback(tmp_path: Path) -> None:
    ended = threading.Event()
    received: list[str] = []
    with (
        running_vendor(SECRET, delay_seconds=0.5) as vendor,
        service_and_client(tmp_path / "data", free_port()) as (service, client),
    ):
        workspace_id = str(client.workspaces.list().items[0].id)
        runs = client.workspace(workspace_id).runs
        job_id = _prepare(client, workspace_id, vendor, tmp_path)
        confirmation = client.workspace(workspace_id).jobs.confirm_run(job_id)
        run_id = str(runs.start(job_id, confirmation_token=confirmation.confirmation_token).id)
        token = (tmp_path / "data" / "bootstrap-admin.token").read_text(encoding="utf-8").strip()

        def follow() -> None:
            url = f"{service.base_url}/api/v1/workspaces/{workspace_id}/runs/{run_id}/events"
            headers = {"Authorization": f"Bearer {token}"}
            try:
                with httpx.stream("GET", url, headers=headers, timeout=60) as stream:
                    for line in stream.iter_lines():
                        received.append(line)
            except httpx.HTTPError:
                pass
            finally:
                ended.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_for("the run to deliver", lambda: vendor.state.delivered() >= 2)
        wait_for("the stream to carry events", lambda: any(line.startswith("id:") for line in received))
        service.process.send_signal(signal.SIGTERM)
        code = service.process.wait(timeout=60)
        log = service.log()

    # uvicorn raises the signal again once it has stopped, as a service manager expects of it.
    assert code == -signal.SIGTERM
    assert ended.wait(timeout=5)
    assert "timeout graceful shutdown exceeded" not in log
    assert "Exception in ASGI application" not in log
    assert "Traceback" not in log
    # Drained as the README says: stopped taking runs, then cancelled the one still sending.
    assert "finished CANCELLED" in log
