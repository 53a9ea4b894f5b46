"""Real resources for the fuzzer to aim at: with only random ids, every case on ``/accounts/{accountId}``
and below stops at 404 and the handlers behind it are never fuzzed.

Everything is created through the API as a user would. The account sends to a closed loopback port, so
a connection test or a run (the seeded one, or one the fuzzer manages to start) never leaves the machine.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import httpx

from tests.integration.api._support import http_account
from tests.integration.api._support_content import HTTP_CONTENT

__all__ = ["seed_workspace"]

_CSV = b"mobile,name\n13800000001,Ann\n13800000002,Bob\n,nobody\n13800000001,Ann again\n"
_ENDED = frozenset({"SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED"})
_MAPPING = {"format": "CSV", "fieldMapping": {"mobile": "mobile", "name": "name"}, "itemIdField": "mobile"}


def _closed_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _created(response: httpx.Response, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, f"{response.request.url.path}: {response.text}"
    body: dict[str, Any] = response.json()
    return body


def seed_workspace(client: httpx.Client, workspace_id: str) -> dict[str, str]:
    """Create one of each resource in the workspace; returns path parameter name → a real value."""
    base = f"/api/v1/workspaces/{workspace_id}"
    account = _created(
        client.post(
            f"{base}/accounts",
            json=http_account("fuzz-orders", base_url=f"http://127.0.0.1:{_closed_loopback_port()}"),
        )
    )
    message = _created(
        client.post(
            f"{base}/messages",
            json={"name": "fuzz-greeting", "providerId": "wepush.http", "content": HTTP_CONTENT},
        )
    )
    audience = _created(client.post(f"{base}/audiences", json={"name": "fuzz-customers"}))
    imports = f"{base}/audiences/{audience['id']}/imports"

    def staged_import() -> str:
        started = _created(client.post(imports, json=_MAPPING))
        uploaded = client.put(
            f"{imports}/{started['id']}/content", content=_CSV, headers={"Content-Type": "text/csv"}
        )
        assert _created(uploaded, 200)["state"] == "STAGED"
        return str(started["id"])

    committed = _created(
        client.post(f"{imports}/{staged_import()}/commit", json={"version": audience["version"]})
    )
    job = _created(
        client.post(
            f"{base}/jobs",
            json={
                "name": "fuzz-weekly",
                "accountId": account["id"],
                "messageId": message["id"],
                "messageRevision": 1,
                "audienceSnapshotId": committed["id"],
            },
        )
    )
    run = _finished_run(client, f"{base}/jobs/{job['id']}", f"{base}/runs")
    # Not the caller's own token: revoking that one would turn every later case into a 401.
    token = _created(client.post(f"{base}/api-tokens", json={"name": "fuzz-viewer", "role": "VIEWER"}))
    return {
        "accountId": str(account["id"]),
        "messageId": str(message["id"]),
        "revision": "1",
        "audienceId": str(audience["id"]),
        # A second import, staged and never committed: preview, errors and commit all have rows to act on.
        "importId": staged_import(),
        "snapshotId": str(committed["id"]),
        "jobId": str(job["id"]),
        "tokenId": str(token["id"]),
        "providerId": "wepush.http",
        # A run that ended with failed items and their artifacts: item pages, artifact downloads, commands
        # a finished run refuses, and resend confirmations all have something real to act on.
        **run,
    }


def _finished_run(client: httpx.Client, job: str, runs: str) -> dict[str, str]:
    # The closed port fails every item at once: no retry to wait for.
    overrides = {"policyOverrides": {"retry": {"maxAttempts": 1}}}
    confirmation = _created(client.post(f"{job}/run-confirmation", json=overrides), 200)
    started = _created(
        client.post(
            f"{job}/runs",
            json={"confirmationToken": confirmation["confirmationToken"], **overrides},
            headers={"Idempotency-Key": "fuzz-seed-run"},
        ),
        202,
    )
    run_id = str(started["id"])
    deadline = time.monotonic() + 60
    while (state := client.get(f"{runs}/{run_id}").json()["state"]) not in _ENDED:
        assert time.monotonic() < deadline, f"the seeded run is still {state}"
        time.sleep(0.1)
    artifacts = client.get(f"{runs}/{run_id}/artifacts").json()["items"]
    assert artifacts, "the seeded run left no artifact"
    return {"runId": run_id, "artifactId": str(artifacts[0]["id"])}
