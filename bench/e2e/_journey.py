"""The user's journey through the Python SDK against a real Service: prepare a job, start the run, and read
back what the Service kept (run detail, event log, the SUCCEEDED_ITEMS artifact)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from wepush.sdk import WePushClient

from ._audience import MESSAGE_CONTENT, PROVIDER_ID, SECRET, account_config
from ._stats import Span

TERMINAL_STATES = frozenset({"SUCCEEDED", "PARTIAL", "FAILED", "CANCELLED"})


def text(value: Any) -> str:
    """Generated-client enums print as ``RunState.RUNNING``; compare by value."""
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class PreparedJob:
    workspace_id: str
    job_id: str
    recipients: int
    upload_s: float
    commit_s: float


def prepare_job(client: WePushClient, vendor_url: str, csv_path: Path, concurrency: int) -> PreparedJob:
    """HTTP account with a bearer secret, message, audience import (streamed upload + commit), job."""
    workspace_id = str(client.workspaces.list().items[0].id)
    workspace = client.workspace(workspace_id)
    account = workspace.accounts.create(
        {
            "name": "vendor mock",
            "providerId": PROVIDER_ID,
            "config": account_config(vendor_url),
            "secrets": {"token": {"operation": "REPLACE", "value": SECRET}},
        }
    )
    message = workspace.messages.create(
        {"name": "bench notice", "providerId": PROVIDER_ID, "content": MESSAGE_CONTENT}
    )
    audience = workspace.audiences.create({"name": "bench audience"})
    started = workspace.audiences.create_import(
        audience.id,
        {"format": "CSV", "hasHeader": True, "fieldMapping": {"mobile": "mobile", "name": "name"}},
    )
    began = time.perf_counter()
    staged = workspace.audiences.upload(audience.id, started.id, csv_path)
    uploaded = time.perf_counter()
    snapshot = workspace.audiences.commit_import(audience.id, started.id, version=audience.version)
    committed = time.perf_counter()
    job = workspace.jobs.create(
        {
            "name": "bench e2e",
            "accountId": account.id,
            "messageId": message.id,
            "messageRevision": 1,
            "audienceSnapshotId": snapshot.id,
            "policies": {"concurrency": {"min": 1, "max": concurrency, "target": concurrency}},
        }
    )
    accepted = int(staged.counts.accepted_rows)
    return PreparedJob(workspace_id, str(job.id), accepted, uploaded - began, committed - uploaded)


def start_run(client: WePushClient, job: PreparedJob) -> tuple[str, float]:
    """Confirm and start a run; returns its id and the ``perf_counter`` just before the start request."""
    workspace = client.workspace(job.workspace_id)
    confirmation = workspace.jobs.confirm_run(job.job_id)
    if confirmation.recipient_count != job.recipients:
        raise RuntimeError(f"confirmation counts {confirmation.recipient_count}, expected {job.recipients}")
    began = time.perf_counter()
    accepted = workspace.runs.start(job.job_id, confirmation_token=confirmation.confirmation_token)
    return str(accepted.id), began


def run_state(client: WePushClient, workspace_id: str, run_id: str) -> str:
    return text(client.workspace(workspace_id).runs.get(run_id).state)


def event_log_counts(client: WePushClient, workspace_id: str, run_id: str) -> dict[str, int]:
    """Every stored event of the run, by type, read page by page."""
    runs = client.workspace(workspace_id).runs
    counts: dict[str, int] = {}
    cursor: str | None = None
    for _ in range(10_000):  # bounded: 100 events a page
        page = runs.event_log(run_id, limit=100, cursor=cursor)
        for event in page.items:
            kind = text(event.type)
            counts[kind] = counts.get(kind, 0) + 1
        if not page.page.has_more or not page.page.next_cursor:
            return counts
        cursor = page.page.next_cursor
    raise RuntimeError("the event log did not end within 10,000 pages")


@dataclass(frozen=True)
class ItemTimings:
    latencies_ms: list[float]
    spans: list[Span]


def succeeded_item_timings(
    client: WePushClient, workspace_id: str, run_id: str, work: Path, timeout_s: float = 120
) -> ItemTimings:
    """Per-item latency (``latencyMs``, else finishedAt − startedAt) and start, from the SUCCEEDED_ITEMS
    artifact as a user downloads it."""
    runs = client.workspace(workspace_id).runs
    deadline = time.monotonic() + timeout_s
    while True:
        ready = [
            a
            for a in runs.artifacts(run_id)
            if text(a.type) == "SUCCEEDED_ITEMS" and text(a.state) == "READY"
        ]
        if ready:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the SUCCEEDED_ITEMS artifact did not become READY")
        time.sleep(0.5)
    destination = work / f"{run_id}-succeeded.jsonl"
    runs.download_artifact(run_id, str(ready[0].id), destination)
    timings = ItemTimings([], [])
    with destination.open(encoding="utf-8") as lines:
        for line in lines:
            item = json.loads(line)
            started, finished = item.get("startedAt"), item.get("finishedAt")
            latency = item.get("latencyMs")
            if latency is None and started and finished:
                latency = (_instant(finished) - _instant(started)).total_seconds() * 1000.0
            if latency is not None:
                timings.latencies_ms.append(float(latency))
            if started and finished:
                span = (_instant(started).timestamp(), _instant(finished).timestamp(), int(item["sequence"]))
                timings.spans.append(span)
    return timings


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
