"""The provider catalog as the API shows it (use cases, one transaction each)."""

from __future__ import annotations

from wepush.server.application._deps import ServiceDeps


class ProviderService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
