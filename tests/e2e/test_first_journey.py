"""The product's first complete journey, as the detailed design lists it, through the Python SDK:

start the standalone Service → HTTP account with a bearer secret → message, audience snapshot, job →
confirm and start a Run → the embedded agent leases and executes it against a local vendor → progress over
SSE (resumed with Last-Event-ID) → the Service is killed mid-run and restarted → the run is recovered →
artifacts downloaded (with Range) → another restart → the history is intact.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.e2e._vendor import Vendor, running_vendor
from tests.helpers_process import free_port, running_service, wait_for
from wepush.sdk import WePushClient
from wepush.sdk.remote import ReconnectPolicy, RunStateConflict

T = TypeVar("T")
SECRET = "e2e-bearer-secret-value-7f3a"
RECIPIENTS = 240
OUTCOME_TYPES = ("SUCCEEDED_ITEMS", "FAILED_ITEMS", "UNKNOWN_ITEMS", "UNSENT_ITEMS")
TERMINAL = {"SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED"}
ENV = {"WEPUSH_SECURITY_LOOPBACK_TARGETS_FOR_TESTS": "true", "WEPUSH_LOGGING_FORMAT": "json"}


@contextmanager
def service_and_client(data_dir: Path, port: int) -> Iterator[tuple[Any, WePushClient]]:
    with running_service(data_dir, port=port, extra_env=ENV) as service:
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        with WePushClient(service.base_url, token, reconnect=ReconnectPolicy(initial_delay=0.05)) as client:
            yield service, client


def _text(value: Any) -> str:
    """Generated-client enums print as ``RunState.RUNNING``; compare by value."""
    return str(getattr(value, "value", value))


def _state(client: WePushClient, workspace_id: str, run_id: str) -> str:
    return _text(client.workspace(workspace_id).runs.get(run_id).state)


def _csv(path: Path) -> Path:
    lines = ["mobile,name"] + [f"1380000{index:04d},user {index}" for index in range(RECIPIENTS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _prepare(client: WePushClient, workspace_id: str, vendor: Vendor, tmp_path: Path) -> str:
    workspace = client.workspace(workspace_id)
    account = workspace.accounts.create(
        {
            "name": "local vendor",
            "providerId": "wepush.http",
            "config": {"baseUrl": vendor.url, "auth": {"type": "BEARER", "token": {"$secret": "token"}}},
            "secrets": {"token": {"operation": "REPLACE", "value": SECRET}},
        }
    )
    message = workspace.messages.create(
        {
            "name": "notice",
            "providerId": "wepush.http",
            "content": {
                "method": "POST",
                "path": "/notify",
                "headers": {"Content-Type": "application/json"},
                "bodyTemplate": '{"to":"{{mobile}}","text":"hello {{name}}"}',
                "successCondition": {"status": [200], "jsonPath": "$.success", "equals": True},
            },
        }
    )
    audience = workspace.audiences.create({"name": "everyone"})
    started = workspace.audiences.create_import(
        audience.id,
        {"format": "CSV", "hasHeader": True, "fieldMapping": {"mobile": "mobile", "name": "name"}},
    )
    staged = workspace.audiences.upload(audience.id, started.id, _csv(tmp_path / "audience.csv"))
    assert staged.counts.accepted_rows == RECIPIENTS
    snapshot = workspace.audiences.commit_import(audience.id, started.id, version=audience.version)
    committed = list(workspace.audiences.iterate_imports(audience.id, state=["COMMITTED"], page_size=1))
    assert [(found.id, found.snapshot_id) for found in committed] == [(started.id, snapshot.id)]
    mistaken = workspace.audiences.create_import(
        audience.id, {"format": "TXT", "fieldMapping": {"1": "mobile"}}
    )
    assert _text(workspace.audiences.discard_import(audience.id, mistaken.id).state) == "DISCARDED"
    job = workspace.jobs.create(
        {
            "name": "journey",
            "accountId": account.id,
            "messageId": message.id,
            "messageRevision": 1,
            "audienceSnapshotId": snapshot.id,
            "policies": {"concurrency": {"min": 1, "max": 8, "target": 2}},
        }
    )
    return str(job.id)


def _artifact_lines(
    client: WePushClient, workspace_id: str, run_id: str, tmp_path: Path
) -> dict[str, list[str]]:
    runs = client.workspace(workspace_id).runs
    by_type: dict[str, list[str]] = {}
    for artifact in runs.artifacts(run_id):
        kind = _text(artifact.type)
        # Uploads the killed process never finished stay listed as FAILED; the recovered run wrote new ones.
        if kind not in OUTCOME_TYPES or _text(artifact.state) != "READY":
            continue
        destination = tmp_path / f"{run_id}-{kind}.jsonl"
        runs.download_artifact(run_id, artifact.id, destination)
        by_type[kind] = [
            json.loads(line)["recipient"]["mobile"] for line in destination.read_text().splitlines()
        ]
    return by_type


@pytest.mark.slow
def test_journey_with_a_restart_mid_run_and_after(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    with running_vendor(SECRET, delay_seconds=0.08) as vendor:
        with service_and_client(data_dir, port) as (service, client):
            workspace_id = str(client.workspaces.list().items[0].id)
            runs = client.workspace(workspace_id).runs
            job_id = _prepare(client, workspace_id, vendor, tmp_path)
            confirmation = client.workspace(workspace_id).jobs.confirm_run(job_id)
            assert confirmation.recipient_count == RECIPIENTS
            accepted = runs.start(job_id, confirmation_token=confirmation.confirmation_token)
            run_id = str(accepted.id)

            # Watch progress, drop the stream, resume with Last-Event-ID: no gap, no duplicate.
            seen: list[int] = []
            with runs.events(run_id) as stream:
                for message in stream:
                    seen.append(int(message.id or 0))
                    if len(seen) >= 3:
                        break
            wait_for("some deliveries", lambda: vendor.state.delivered() >= 20)
            with runs.events(run_id, last_event_id=str(seen[-1])) as stream:
                for message in stream:
                    seen.append(int(message.id or 0))
                    if len(seen) >= 5:
                        break
            assert seen == list(range(seen[0], seen[0] + len(seen)))

            # Commands from the SDK: an illegal one is refused with the state and the allowed commands.
            with pytest.raises(RunStateConflict) as refused:
                runs.resume(run_id)
            assert refused.value.current_state == "RUNNING"
            runs.change_concurrency(run_id, 3)

            # The Service dies in the middle of the run.
            assert _state(client, workspace_id, run_id) == "RUNNING"
            os.kill(service.process.pid, signal.SIGKILL)
            service.process.wait(10)
        delivered_before_restart = vendor.state.delivered()
        assert 0 < delivered_before_restart < RECIPIENTS

        with service_and_client(data_dir, port) as (_service, client):
            runs = client.workspace(workspace_id).runs
            final = wait_for(
                "the run to be recovered",
                lambda: (state := _state(client, workspace_id, run_id)) in TERMINAL and state,
            )
            detail = runs.get(run_id)
            counts = detail.counts
            assert counts.total == RECIPIENTS
            assert (
                counts.total
                == counts.succeeded + counts.failed + counts.unknown + counts.unsent + counts.skipped
            )
            assert final in {"PARTIAL", "FAILED"}
            events = [event.type for event in runs.event_log(run_id, limit=100).items]
            assert "RUN_LOST" in [_text(e) for e in events]

            # Every recipient is in exactly one outcome artifact; nobody got the message twice.
            outcomes = _artifact_lines(client, workspace_id, run_id, tmp_path)
            everyone = [mobile for lines in outcomes.values() for mobile in lines]
            assert len(everyone) == RECIPIENTS
            assert len(set(everyone)) == RECIPIENTS
            assert vendor.state.duplicates() == {}
            assert len(outcomes.get("SUCCEEDED_ITEMS", [])) == counts.succeeded

            # Range downloads return exactly the requested bytes.
            succeeded = next(
                a
                for a in runs.artifacts(run_id)
                if _text(a.type) == "SUCCEEDED_ITEMS" and _text(a.state) == "READY"
            )
            whole = httpx.get(
                f"http://127.0.0.1:{port}/api/v1/workspaces/{workspace_id}/runs/{run_id}/artifacts/{succeeded.id}/content",
                headers={
                    "Authorization": f"Bearer {(data_dir / 'bootstrap-admin.token').read_text().strip()}"
                },
            )
            part = httpx.get(
                whole.url,
                headers={
                    "Authorization": f"Bearer {(data_dir / 'bootstrap-admin.token').read_text().strip()}",
                    "Range": "bytes=10-49",
                },
            )
            assert part.status_code == 206
            assert part.content == whole.content[10:50]
            assert "attachment" in part.headers["content-disposition"]
            history = (_text(detail.state), counts.succeeded, len(events))

        # After a clean restart the history is intact.
        with service_and_client(data_dir, port) as (_service, client):
            runs = client.workspace(workspace_id).runs
            again = runs.get(run_id)
            assert (
                _text(again.state),
                again.counts.succeeded,
                len(runs.event_log(run_id, limit=100).items),
            ) == history
    assert SECRET not in (data_dir.parent / f"{data_dir.name}-service.log").read_text(encoding="utf-8")
