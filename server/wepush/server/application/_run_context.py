"""Plumbing every Run use case shares: its ports, authorization with audited refusals, the race of two
first requests with one Idempotency-Key, and the hints sent after a commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from wepush.server.application._accounts_access import authorize_audited
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._run_confirmation import ConfirmationSigner
from wepush.server.application._run_ports import RunEventFeed
from wepush.server.application.auth import Principal, Role
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.execution import ArtifactDownloads, ArtifactStore, RunAvailabilityNotifier
from wepush.server.application.idempotent import Outcome

RESOURCE = "RUN"
ARTIFACT = "ARTIFACT"


@dataclass(frozen=True, slots=True)
class RunPorts:
    """What the Run use cases need beyond :class:`ServiceDeps`."""

    confirmation_key: bytes
    notifier: RunAvailabilityNotifier
    events: RunEventFeed
    artifacts: ArtifactStore
    sse_heartbeat: timedelta


def missing_key() -> ValidationFailed:
    return ValidationFailed(
        "The Idempotency-Key header is required.",
        [FieldIssue("Idempotency-Key", "REQUIRED", "send a unique key per intended run")],
    )


class RunUseCases:
    """The state the Run use-case groups share (they are combined into ``RunService``)."""

    def __init__(self, deps: ServiceDeps, ports: RunPorts) -> None:
        self._deps = deps
        self._ports = ports
        self._signer = ConfirmationSigner(ports.confirmation_key)
        self._downloads = ArtifactDownloads(deps.uow, ports.artifacts)

    @property
    def heartbeat_seconds(self) -> float:
        return self._ports.sse_heartbeat.total_seconds()

    async def _authorize(
        self,
        principal: Principal,
        workspace_id: str,
        role: Role,
        action: str,
        *,
        resource_id: str | None = None,
        trace_id: str | None = None,
        resource_type: str = RESOURCE,
    ) -> None:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            role,
            action=action,
            resource_type=resource_type,
            resource_id=resource_id,
            trace_id=trace_id,
        )

    def _after_commit(self, outcome: Outcome) -> None:
        if not outcome.replayed:
            self._ports.notifier.notify()
            if outcome.resource_id is not None:
                self._ports.events.hint(outcome.resource_id)
