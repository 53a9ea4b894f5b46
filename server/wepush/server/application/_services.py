"""The bundle of application services a request handler can reach, assembled by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from wepush.server.application._deps import ServiceDeps
from wepush.server.application.accounts import AccountService
from wepush.server.application.audiences import AudienceService
from wepush.server.application.audit_log import AuditQueryService
from wepush.server.application.auth import Authenticator
from wepush.server.application.health import HealthService
from wepush.server.application.imports import ImportService
from wepush.server.application.jobs import JobService
from wepush.server.application.messages import MessageService
from wepush.server.application.metrics import InstanceMetrics
from wepush.server.application.paging import CursorCodec
from wepush.server.application.providers import ProviderService
from wepush.server.application.request_budget import RequestBudget
from wepush.server.application.runs import RunPorts, RunService
from wepush.server.application.scope_check import ScopeCheck
from wepush.server.application.tokens import TokenService
from wepush.server.application.workspaces import WorkspaceService


@dataclass(slots=True)
class ResourceServices:
    workspaces: WorkspaceService
    providers: ProviderService
    accounts: AccountService
    tokens: TokenService
    audit: AuditQueryService
    messages: MessageService
    audiences: AudienceService
    imports: ImportService
    jobs: JobService
    runs: RunService
    #: The basic scope check of requests refused before their use case runs.
    scope: ScopeCheck

    @classmethod
    def build(cls, deps: ServiceDeps, *, run_ports: RunPorts) -> ResourceServices:
        return cls(
            workspaces=WorkspaceService(deps),
            providers=ProviderService(deps),
            accounts=AccountService(deps),
            tokens=TokenService(deps),
            audit=AuditQueryService(deps),
            messages=MessageService(deps),
            audiences=AudienceService(deps),
            imports=ImportService(deps),
            jobs=JobService(deps),
            runs=RunService(deps, run_ports),
            scope=ScopeCheck(deps),
        )


@dataclass(frozen=True, slots=True)
class StartedServices:
    """What exists only once start-up has opened the database and loaded the server keys."""

    auth: Authenticator
    cursors: CursorCodec
    resources: ResourceServices
    #: API requests each token may make (RATE_LIMITED beyond it).
    budget: RequestBudget
    #: ``/metrics``; ``None`` when the configuration turned it off.
    metrics: InstanceMetrics | None = None


class ServiceNotStarted(RuntimeError):
    """A request arrived before start-up finished (or after shutdown began)."""


@dataclass(slots=True)
class ApplicationServices:
    """Everything the API layer may call. Handlers translate; these services decide."""

    health: HealthService
    mode: str
    version: str
    started: StartedServices | None = None

    def require_started(self) -> StartedServices:
        if self.started is None:
            raise ServiceNotStarted("the Service is not ready")
        return self.started

    @property
    def auth(self) -> Authenticator:
        return self.require_started().auth

    @property
    def budget(self) -> RequestBudget:
        return self.require_started().budget

    @property
    def cursors(self) -> CursorCodec:
        return self.require_started().cursors

    @property
    def resources(self) -> ResourceServices:
        return self.require_started().resources
