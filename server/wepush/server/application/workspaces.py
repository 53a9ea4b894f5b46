"""Workspaces and their members (use cases, one transaction each)."""

from __future__ import annotations

from wepush.server.application._deps import ServiceDeps


class WorkspaceService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
