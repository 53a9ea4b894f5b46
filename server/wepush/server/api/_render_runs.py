"""Explicit mappers from Run read models to the public API's JSON bodies (runs, items, commands, events,
artifacts, confirmations). Times are UTC ISO-8601 with ``Z``; durations ISO-8601."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from wepush.server.api._render_core import iso
from wepush.server.application.runs import (
    ResendConfirmationView,
    RunConfirmationView,
    RunItemView,
    RunView,
    api_policies,
)
from wepush.server.domain import (
    TERMINAL_RUN_STATES,
    Artifact,
    ArtifactState,
    Run,
    RunCommand,
    RunCommandState,
    RunEvent,
)

#: The contract's ArtifactType enum. An artifact of another type is not advertised until the contract
#: names it (the response would not conform otherwise).
CONTRACT_ARTIFACT_TYPES: Final = frozenset(
    {
        "SUCCEEDED_ITEMS",
        "FAILED_ITEMS",
        "UNKNOWN_ITEMS",
        "UNSENT_ITEMS",
        "SKIPPED_ITEMS",
        "RUN_LOG",
        "RESULTS_EXPORT",
        "RESPONSE_BODIES",
        "AUDIENCE_RECIPIENTS",
    }
)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


def iso_duration(seconds: float) -> str:
    """``PT1H2M3S`` style (whole seconds; ``PT0S`` for nothing)."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)
    return f"PT{text or '0S'}"


def run_path(workspace_id: str, run_id: str) -> str:
    return f"/api/v1/workspaces/{workspace_id}/runs/{run_id}"


def _content_href(artifact: Artifact, run_id: str) -> str:
    return f"{run_path(artifact.workspace_id, run_id)}/artifacts/{artifact.id}/content"


def render_run_accepted(run: Run) -> dict[str, Any]:
    base = run_path(run.workspace_id, run.id)
    return {
        "id": run.id,
        "state": run.state.value,
        "createdAt": iso(run.created_at),
        "links": {"self": base, "events": f"{base}/events"},
    }


def _counts(view: RunView) -> dict[str, int]:
    run = view.run
    c = run.counts
    finished = c.succeeded + c.failed + c.unknown + c.unsent + c.skipped
    total = c.total or run.recipient_count
    remaining = max(0, total - finished)
    if run.state in TERMINAL_RUN_STATES:
        in_flight, pending = 0, 0
    elif view.executing:
        # The row keeps finished counters; in flight is the figure of the latest PROGRESS event (the one
        # the event stream showed), none before the first. Bounded by what remains, so the counts
        # still add up to the total.
        in_flight = min(view.live_in_flight or 0, remaining)
        pending = remaining - in_flight
    else:
        in_flight, pending = 0, remaining
    return {
        "total": total,
        "pending": pending,
        "inFlight": in_flight,
        "succeeded": c.succeeded,
        "failed": c.failed,
        "unknown": c.unknown,
        "unsent": c.unsent,
        "skipped": c.skipped,
        "retried": c.retried,
    }


def _elapsed(view: RunView) -> float | None:
    run = view.run
    if run.started_at is None:
        return None
    end = run.ended_at or view.now
    return max(0.0, (end - run.started_at).total_seconds())


def _artifact_link(artifact: Artifact, run_id: str) -> dict[str, Any]:
    return {
        "id": artifact.id,
        "type": artifact.artifact_type,
        "state": artifact.state.value,
        "href": _content_href(artifact, run_id),
    }


def render_run(view: RunView) -> dict[str, Any]:
    run = view.run
    snapshot = view.snapshot
    counts = _counts(view)
    elapsed = _elapsed(view)
    finished = sum(counts[k] for k in ("succeeded", "failed", "unknown", "unsent", "skipped"))
    body: dict[str, Any] = {
        "id": run.id,
        "workspaceId": run.workspace_id,
        "jobId": run.job_id,
        "state": run.state.value,
        "stateReason": run.state_reason,
        "trigger": run.trigger.value,
        "scheduleId": run.schedule_id,
        "sourceRunId": run.source_run_id,
        "dryRun": run.dry_run,
        "reason": run.reason,
        "providerId": run.provider_id,
        "snapshot": {
            "accountId": snapshot.account.id,
            "accountVersion": snapshot.account.version,
            "messageId": snapshot.message.id,
            "messageRevision": snapshot.message.revision,
            "audienceSnapshotId": snapshot.audience.snapshot_id,
            "audienceRevision": view.audience_revision,
            "providerId": snapshot.provider.id,
            "providerVersion": snapshot.provider.version,
            "schemaVersion": snapshot.account.schema_version,
            "policies": api_policies(snapshot.policies),
        },
        "counts": counts,
        "concurrency": {
            "current": view.concurrency.current,
            "target": view.concurrency.target,
            "min": view.concurrency.min,
            "max": view.concurrency.max,
        },
        "rate": {
            "itemsPerSecond": round(finished / elapsed, 3) if elapsed else 0.0,
            "limitPerSecond": view.rate_limit,
        },
        "startedAt": _iso(run.started_at),
        "endedAt": _iso(run.ended_at),
        "duration": None if elapsed is None else iso_duration(elapsed),
        "artifacts": [
            _artifact_link(a, run.id) for a in view.artifacts if a.artifact_type in CONTRACT_ARTIFACT_TYPES
        ],
        "allowedCommands": [c.value for c in view.allowed_commands],
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.updated_at),
        "version": run.version,
    }
    if view.lease is not None:
        body["lease"] = {
            "leaseId": view.lease.id,
            "epoch": view.lease.epoch,
            "state": view.lease.state.value,
            "expiresAt": iso(view.lease.expires_at),
        }
        if view.agent is not None:
            body["agent"] = {"agentId": view.agent.id, "displayName": view.agent.display_name[:200]}
    return body


def render_run_confirmation(view: RunConfirmationView) -> dict[str, Any]:
    snapshot = view.snapshot
    return {
        "jobId": view.job.id,
        "providerId": snapshot.provider.id,
        "accountId": snapshot.account.id,
        "accountName": view.account_name,
        "messageId": snapshot.message.id,
        "messageRevision": snapshot.message.revision,
        "audienceSnapshotId": snapshot.audience.snapshot_id,
        "recipientCount": snapshot.audience.recipient_count,
        "policies": api_policies(snapshot.policies),
        "dryRun": snapshot.dry_run,
        "estimatedDuration": None if view.estimated_seconds is None else iso_duration(view.estimated_seconds),
        "confirmationToken": view.token,
        "expiresAt": iso(view.expires_at),
    }


def render_resend_confirmation(view: ResendConfirmationView) -> dict[str, Any]:
    return {
        "sourceRunId": view.source_run_id,
        "outcomes": [s.value for s in view.outcomes],
        "matchingItems": view.matching_items,
        "confirmationToken": view.token,
        "expiresAt": iso(view.expires_at),
    }


def render_item(view: RunItemView) -> dict[str, Any]:
    item = view.item
    body: dict[str, Any] = {
        "itemId": item.item_id,
        "recipientItemId": view.recipient_item_id,
        "sequence": item.sequence,
        "state": item.state.value,
        "attempts": item.attempt,
        "providerCode": item.provider_code,
        "diagnostic": None if item.diagnostic is None else item.diagnostic[:2000],
        "externalRequestId": item.external_request_id,
        # The end of the last attempt when known: the row's update time is when the result was stored,
        # after the item completed.
        "lastAttemptAt": iso(item.finished_at or item.updated_at) if item.attempt > 0 else None,
        "completedAt": _iso(item.finished_at),
    }
    if item.error_category is not None:
        # The contract's ErrorCategory is not nullable: no category, no member.
        body["errorCategory"] = item.error_category
    return body


def render_command_accepted(command: RunCommand) -> dict[str, Any]:
    return {
        "commandId": command.command_id,
        "type": command.type.value,
        "state": command.state.value,
        "createdAt": iso(command.created_at),
    }


def render_command(command: RunCommand) -> dict[str, Any]:
    return {
        "commandId": command.command_id,
        "runId": command.run_id,
        "type": command.type.value,
        "state": command.state.value,
        "reason": command.payload.get("reason"),
        "target": command.payload.get("target"),
        "rejectionReason": command.result_message if command.state is RunCommandState.REJECTED else None,
        "createdAt": iso(command.created_at),
        "acknowledgedAt": _iso(command.acknowledged_at),
    }


def render_event(event: RunEvent) -> dict[str, Any]:
    return {
        "runId": event.run_id,
        "sequence": event.sequence,
        "type": event.type,
        "occurredAt": iso(event.occurred_at),
        "data": event.data,
    }


def render_artifact(artifact: Artifact) -> dict[str, Any]:
    run_id = artifact.owner_id
    return {
        "id": artifact.id,
        "runId": run_id,
        "type": artifact.artifact_type,
        "state": artifact.state.value,
        "mediaType": artifact.content_type,
        "fileName": artifact.file_name,
        "sizeBytes": artifact.size_bytes,
        "sha256": artifact.sha256,
        "createdAt": iso(artifact.created_at),
        "readyAt": iso(artifact.updated_at) if artifact.state is ArtifactState.READY else None,
        "expiresAt": _iso(artifact.expires_at),
        "contentHref": _content_href(artifact, run_id),
    }
