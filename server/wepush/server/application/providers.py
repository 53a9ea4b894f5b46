"""The provider catalog as the API shows it: descriptors and JSON Schemas, readable by any user.

The catalog is built once at start-up and shared read-only, so nothing here touches the database.
"""

from __future__ import annotations

from wepush.agent.engine import ProviderDescriptor
from wepush.server.application._deps import ServiceDeps
from wepush.server.application.auth import Principal, PrincipalType
from wepush.server.application.errors import AccessDenied
from wepush.server.domain import NotFound

__all__ = ["ProviderService"]


def _require_user(principal: Principal) -> None:
    if principal.type is not PrincipalType.USER:
        raise AccessDenied("Only user API tokens may call the public API.")


class ProviderService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    def list_descriptors(self, principal: Principal) -> tuple[ProviderDescriptor, ...]:
        """Active providers ordered by id."""
        _require_user(principal)
        return self._deps.catalog.list()

    def get(self, principal: Principal, provider_id: str) -> ProviderDescriptor:
        _require_user(principal)
        factory = self._deps.catalog.get(provider_id)
        if factory is None:
            raise NotFound("Provider", provider_id)
        return factory.descriptor()
