"""Reading the audit log (use cases, one transaction each)."""

from __future__ import annotations

from wepush.server.application._deps import ServiceDeps


class AuditQueryService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
