"""What a request into a workspace logs carries the seed's structured fields: the trace id the response
returns, the workspace (and run) the path names, and a stable event name."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api._support import API, accounts_url, default_workspace, service
from wepush.server.domain import new_id
from wepush.server.infra.logging import JsonFormatter


@pytest.fixture
def api_log() -> Iterator[io.StringIO]:
    """The API logger's records as the Service's JSON lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(service="wepush-server", instance_id="node-a"))
    logger = logging.getLogger("wepush.server.api")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(previous)


def _entries(stream: io.StringIO, event: str) -> list[dict[str, Any]]:
    found = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [entry for entry in found if entry["event"] == event]


async def test_a_rejected_body_in_a_workspace_logs_the_workspace_and_trace_ids(
    tmp_path: Path, api_log: io.StringIO
) -> None:
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            accounts_url(ws), headers={**app.admin(), "X-Trace-Id": "trace-ws-1"}, json={"name": 5}
        )

    assert response.status_code == 400
    [entry] = _entries(api_log, "REQUEST_BODY_REJECTED")
    assert entry["traceId"] == "trace-ws-1" == response.headers["x-trace-id"]
    assert entry["workspaceId"] == ws
    assert entry["runId"] is None
    assert entry["service"] == "wepush-server"


async def test_a_rejected_run_command_logs_the_run_id_too(tmp_path: Path, api_log: io.StringIO) -> None:
    run_id = new_id()
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        response = await app.client.post(
            f"{API}/workspaces/{ws}/runs/{run_id}/commands/change-concurrency",
            headers=app.admin(),
            json={"target": "many"},
        )

    assert response.status_code == 400
    [entry] = _entries(api_log, "REQUEST_BODY_REJECTED")
    assert (entry["workspaceId"], entry["runId"]) == (ws, run_id)
    assert entry["traceId"] == response.headers["x-trace-id"]
