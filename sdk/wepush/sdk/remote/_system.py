"""Accessors outside any one workspace: workspaces, the provider catalog, the agent fleet, and what the
Service says about itself (its version and its health probes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import httpx

from wepush_client import AgentsApi, HealthApi, ProvidersApi, WorkspacesApi
from wepush_client.models import (
    Agent,
    AgentCredentialRotated,
    AgentCredentialRotation,
    AgentDisable,
    AgentPage,
    EnrollmentTokenCreate,
    EnrollmentTokenCreated,
    HealthStatus,
    Provider,
    ProviderPage,
    ProviderSchemas,
    SystemInfo,
    Workspace,
    WorkspaceCreate,
    WorkspaceMember,
    WorkspaceMemberPage,
    WorkspaceMemberRoleUpdate,
    WorkspacePage,
    WorkspaceUpdate,
)

from ._errors import InvalidResponse, TransportError, problem_error_from_response
from ._retry import parse_retry_after
from ._session import Session
from ._support import Body, Resource, as_model, iterate_pages, new_idempotency_key

__all__ = ["AgentsClient", "ProvidersClient", "SystemClient", "WorkspacesClient"]


class WorkspacesClient(Resource):
    """``/workspaces``: returns the generated models (``Workspace``, ``WorkspaceMember`` ...)."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._api = self._generated(WorkspacesApi)

    def create(self, workspace: Body, *, idempotency_key: str | None = None) -> Workspace:
        return self._api.create_workspace(
            as_model(WorkspaceCreate, workspace), idempotency_key=new_idempotency_key(idempotency_key)
        )

    def get(self, workspace_id: str) -> Workspace:
        return self._api.get_workspace(workspace_id)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, name: str | None = None
    ) -> WorkspacePage:
        return self._api.list_workspaces(limit=limit, cursor=cursor, name=name)

    def iterate(self, *, name: str | None = None, page_size: int | None = None) -> Iterator[Workspace]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, name=name))

    def update(self, workspace_id: str, update: Body) -> Workspace:
        return self._api.update_workspace(workspace_id, as_model(WorkspaceUpdate, update))

    def list_members(
        self, workspace_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> WorkspaceMemberPage:
        return self._api.list_workspace_members(workspace_id, limit=limit, cursor=cursor)

    def iterate_members(
        self, workspace_id: str, *, page_size: int | None = None
    ) -> Iterator[WorkspaceMember]:
        return iterate_pages(lambda cursor: self.list_members(workspace_id, limit=page_size, cursor=cursor))

    def set_member_role(self, workspace_id: str, user_id: str, update: Body) -> WorkspaceMember:
        return self._api.put_workspace_member_role(
            workspace_id, user_id, as_model(WorkspaceMemberRoleUpdate, update)
        )

    def remove_member(self, workspace_id: str, user_id: str) -> None:
        """Remove a membership; 409 RESOURCE_IN_USE (``ResourceInUse``) for the last ADMIN."""
        self._api.delete_workspace_member(workspace_id, user_id)


class ProvidersClient(Resource):
    """``/providers``: the read-only provider catalog (``Provider``, ``ProviderSchemas``)."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._api = self._generated(ProvidersApi)

    def get(self, provider_id: str) -> Provider:
        return self._api.get_provider(provider_id)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> ProviderPage:
        return self._api.list_providers(limit=limit, cursor=cursor)

    def iterate(self, *, page_size: int | None = None) -> Iterator[Provider]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor))

    def schemas(self, provider_id: str) -> ProviderSchemas:
        """The account and message JSON Schemas a client renders its forms from."""
        return self._api.get_provider_schemas(provider_id)


class AgentsClient(Resource):
    """``/agents``: the agent fleet, system-wide (system administrators only)."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._api = self._generated(AgentsApi)

    def get(self, agent_id: str) -> Agent:
        return self._api.get_agent(agent_id)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, status: Sequence[str] | None = None
    ) -> AgentPage:
        return self._api.list_agents(limit=limit, cursor=cursor, status=None if status is None else [*status])

    def iterate(
        self, *, status: Sequence[str] | None = None, page_size: int | None = None
    ) -> Iterator[Agent]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, status=status))

    def create_enrollment_token(self, request: Body | None = None) -> EnrollmentTokenCreated:
        """A one-time enrollment token (returned once, in ``EnrollmentTokenCreated``)."""
        body = None if request is None else as_model(EnrollmentTokenCreate, request)
        return self._api.create_enrollment_token(enrollment_token_create=body)

    def disable(self, agent_id: str, request: Body | None = None) -> Agent:
        body = None if request is None else as_model(AgentDisable, request)
        return self._api.disable_agent(agent_id, agent_disable=body)

    def rotate_credential(self, agent_id: str, request: Body | None = None) -> AgentCredentialRotated:
        body = None if request is None else as_model(AgentCredentialRotation, request)
        return self._api.rotate_agent_credential(agent_id, agent_credential_rotation=body)


_LIVE = "/health/live"
_READY = "/health/ready"


def _health_status(response: httpx.Response) -> HealthStatus | None:
    try:
        status: HealthStatus | None = HealthStatus.from_dict(response.json())
    except (ValueError, TypeError):  # not JSON, or not the contract's shape (pydantic's is a ValueError)
        return None
    return status


class SystemClient(Resource):
    """What the Service says about itself; needs no token (and the probes are sent without one)."""

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._api = self._generated(HealthApi)

    def info(self) -> SystemInfo:
        """``GET /system/info``: version, API version and mode (STANDALONE or SERVER)."""
        return self._api.get_system_info()

    def probe(self, path: str, *, timeout: float | None = None) -> HealthStatus:
        """One GET of a health probe, never retried: a probe reports how the Service is now.

        Readiness answers 503 with the same body naming the checks that are DOWN: that is a result
        (status DOWN), not an error. Any other failure is raised as for every call.
        """
        limits = self._session.timeouts.for_call(timeout).httpx()
        try:
            response = self._session.http.get(path, headers={"Accept": "application/json"}, timeout=limits)
        except httpx.TransportError as exc:
            raise TransportError(type(exc).__name__, method="GET", path=path, attempts=1) from exc
        if response.status_code == 200 or (path == _READY and response.status_code == 503):
            status = _health_status(response)
            if status is None:
                raise InvalidResponse(f"GET {path} answered {response.status_code} without a health status")
            return status
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=self._session.now())
        raise problem_error_from_response(response.status_code, response.content, retry_after=retry_after)

    def liveness(self, *, timeout: float | None = None) -> HealthStatus:
        return self.probe(_LIVE, timeout=timeout)

    def readiness(self, *, timeout: float | None = None) -> HealthStatus:
        return self.probe(_READY, timeout=timeout)
