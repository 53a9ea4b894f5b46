"""Audit records: who did what to which resource, with field names and summaries — never values."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from wepush.server.application.auth import Principal
from wepush.server.domain import AuditEvent, AuditOutcome, JsonObject, UnitOfWork


class Auditor:
    """Appends audit events inside the caller's transaction, so the record commits with the change."""

    def __init__(
        self, clock: Callable[[], datetime], trace_source: Callable[[], str | None] | None = None
    ) -> None:
        self._clock = clock
        # The request's trace id where the caller passed none: a use case that audits a refusal or a read
        # need not thread the id through every signature for the event to point at the request's logs.
        self._trace_source = trace_source

    async def record(
        self,
        uow: UnitOfWork,
        principal: Principal,
        action: str,
        resource_type: str,
        *,
        workspace_id: str | None,
        resource_id: str | None = None,
        outcome: AuditOutcome = AuditOutcome.SUCCESS,
        fields: Iterable[str] = (),
        summary: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        details: JsonObject = {"fieldNames": sorted(set(fields))}
        if summary:
            details["summary"] = summary[:512]
        if principal.system_admin:
            details["systemAdmin"] = True
        now = self._clock()
        await uow.audit.append(
            AuditEvent(
                workspace_id=workspace_id,
                occurred_at=now,
                actor_type=principal.type.value,
                actor_id=principal.id,
                action=action,
                resource_type=resource_type,
                resource_id=resource_id,
                outcome=outcome,
                details=details,
                trace_id=trace_id or (self._trace_source() if self._trace_source is not None else None),
                created_at=now,
            )
        )
