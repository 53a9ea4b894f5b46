"""The remote SDK's entry points: :class:`WePushClient` and its :class:`WorkspaceClient`."""

from __future__ import annotations

from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

from wepush_client.models import HealthStatus, SystemInfo

from ._accounts import AccountsClient
from ._audiences import AudiencesClient
from ._audit import AuditClient, SystemAuditClient
from ._jobs import JobsClient
from ._messages import MessagesClient
from ._retry import ReconnectPolicy, RetryPolicy
from ._runs import RunsClient
from ._session import Session, Timeouts
from ._system import AgentsClient, ProvidersClient, SystemClient, WorkspacesClient
from ._tokens import TokensClient
from ._transport import BearerToken, TokenSource

__all__ = ["WePushClient", "WorkspaceClient"]


def _normalized_endpoint(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("endpoint must be an http(s) URL such as https://wepush.example.com")
    if parts.username or parts.password:
        # Credentials in the URL would leak through reprs and logs; the token parameter is the only way.
        raise ValueError("endpoint must not carry credentials; pass the token separately")
    if parts.query or parts.fragment:
        raise ValueError("endpoint must not have a query or fragment")
    return endpoint.rstrip("/")


class WorkspaceClient:
    """Accessors scoped to one workspace: ``accounts``, ``messages``, ``audiences``, ``jobs``, ``runs``,
    ``tokens`` (API tokens) and ``audit`` (audit events).

    ``agents`` is the client's system-wide agent accessor, offered here as well for convenience.
    """

    def __init__(self, session: Session, workspace_id: str, agents: AgentsClient) -> None:
        if not workspace_id:
            raise ValueError("workspace_id must not be empty")
        self._workspace_id = workspace_id
        self.accounts = AccountsClient(session, workspace_id)
        self.messages = MessagesClient(session, workspace_id)
        self.audiences = AudiencesClient(session, workspace_id)
        self.jobs = JobsClient(session, workspace_id)
        self.runs = RunsClient(session, workspace_id)
        self.tokens = TokensClient(session, workspace_id)
        self.audit = AuditClient(session, workspace_id)
        self.agents = agents

    @property
    def workspace_id(self) -> str:
        return self._workspace_id

    def __repr__(self) -> str:
        return f"WorkspaceClient(workspace_id={self._workspace_id!r})"


class WePushClient:
    """A connection to a WePush Next Service's REST API.

    ``token`` is an API token, or a callable returning the current one (asked again for every request,
    so rotation needs no new client). Requests time out after ``connect_timeout`` to connect and
    ``request_timeout`` per read. Retries follow :class:`RetryPolicy`: GET and idempotency-keyed POSTs
    after network errors with exponential backoff and jitter, at most ``max_retries`` times; 429/503
    after their ``Retry-After`` when it is at most ``max_retry_wait`` seconds. Use it as a context
    manager, or call :meth:`close`, to release its connection pools. Beside :meth:`workspace` it offers
    ``workspaces``, ``providers``, ``agents``, ``audit`` (system-wide audit events), :meth:`system_info`
    and the health probes :meth:`liveness` and :meth:`readiness`. Uploads, downloads and an import's
    commit also take a ``timeout`` of their own, for files that need longer than ``request_timeout``.
    For example::

        with WePushClient("https://wepush.example.com", token=lambda: vault.current()) as client:
            runs = client.workspace(workspace_id).runs
            accepted = runs.start(job_id, dry_run=True)
            with runs.events(accepted.id) as events:
                for event in events:
                    print(event.type, event.data)
    """

    def __init__(
        self,
        endpoint: str,
        token: TokenSource,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 30.0,
        initial_backoff: float = 0.25,
        max_backoff: float = 8.0,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        self._session = Session(
            endpoint=_normalized_endpoint(endpoint),
            token=BearerToken(token),
            timeouts=Timeouts(connect=connect_timeout, request=request_timeout),
            retry=RetryPolicy(
                max_retries=max_retries,
                initial_backoff=initial_backoff,
                max_backoff=max_backoff,
                max_retry_wait=max_retry_wait,
            ),
            reconnect=reconnect or ReconnectPolicy(),
        )
        self.workspaces = WorkspacesClient(self._session)
        self.providers = ProvidersClient(self._session)
        self.agents = AgentsClient(self._session)
        self.audit = SystemAuditClient(self._session)
        self._system = SystemClient(self._session)
        self._closed = False

    @property
    def endpoint(self) -> str:
        return self._session.endpoint

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._session.retry

    def system_info(self) -> SystemInfo:
        """The Service's version, API version and mode (``SystemInfo``)."""
        return self._system.info()

    def liveness(self, *, timeout: float | None = None) -> HealthStatus:
        """``GET /health/live``: ``HealthStatus`` UP while the process and its core tasks are alive.

        Sent once, without the token and without retries; a Service that cannot be reached raises
        ``TransportError``. ``timeout`` replaces ``request_timeout`` for this call.
        """
        return self._system.liveness(timeout=timeout)

    def readiness(self, *, timeout: float | None = None) -> HealthStatus:
        """``GET /health/ready``: ``HealthStatus`` with one entry per check (database, migrations, secrets,
        artifacts, providers).

        A Service that is not ready answers 503 with the same document: it is returned with status DOWN
        (its ``checks`` say which are DOWN and why), not raised. Sent once, without the token and without
        retries; ``timeout`` replaces ``request_timeout`` for this call.
        """
        return self._system.readiness(timeout=timeout)

    def workspace(self, workspace_id: str) -> WorkspaceClient:
        return WorkspaceClient(self._session, workspace_id, self.agents)

    def close(self) -> None:
        """Close the connection pools; idempotent. Open event subscriptions should be closed first."""
        if not self._closed:
            self._closed = True
            self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"WePushClient(endpoint={self._session.endpoint!r})"
