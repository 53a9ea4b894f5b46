"""The unit of work: one database transaction that every repository of a use case shares."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Protocol

from ._ports_agents import AgentOutboxRepository, AgentRepository, LeaseRepository
from ._ports_audience import AudienceImportRepository, AudienceRepository
from ._ports_records import ArtifactRepository, AuditRepository, IdempotencyRepository
from ._ports_resources import AccountRepository, JobRepository, MessageRepository, ScheduleRepository
from ._ports_runs import RunCommandRepository, RunEventRepository, RunItemRepository, RunRepository
from ._ports_workspace import ApiTokenRepository, SecretRecordRepository, WorkspaceRepository


class UnitOfWork(Protocol):
    """``async with uow:`` opens one transaction; a clean exit commits, an exception rolls back.

    Repositories are only usable inside the block and never commit themselves. Do not call providers,
    upload artifacts or wait for agents inside it: keep transactions short.
    """

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    @property
    def workspaces(self) -> WorkspaceRepository: ...
    @property
    def api_tokens(self) -> ApiTokenRepository: ...
    @property
    def secret_records(self) -> SecretRecordRepository: ...
    @property
    def accounts(self) -> AccountRepository: ...
    @property
    def messages(self) -> MessageRepository: ...
    @property
    def audiences(self) -> AudienceRepository: ...
    @property
    def audience_imports(self) -> AudienceImportRepository: ...
    @property
    def jobs(self) -> JobRepository: ...
    @property
    def schedules(self) -> ScheduleRepository: ...
    @property
    def runs(self) -> RunRepository: ...
    @property
    def run_items(self) -> RunItemRepository: ...
    @property
    def run_events(self) -> RunEventRepository: ...
    @property
    def run_commands(self) -> RunCommandRepository: ...
    @property
    def agents(self) -> AgentRepository: ...
    @property
    def leases(self) -> LeaseRepository: ...
    @property
    def agent_outbox(self) -> AgentOutboxRepository: ...
    @property
    def artifacts(self) -> ArtifactRepository: ...
    @property
    def audit(self) -> AuditRepository: ...
    @property
    def idempotency(self) -> IdempotencyRepository: ...


class UnitOfWorkFactory(Protocol):
    """Creates a fresh unit of work. ``read_only`` lets SQLite start a deferred (shared) transaction
    instead of taking the write lock up front."""

    def __call__(self, *, read_only: bool = False) -> UnitOfWork: ...

    @property
    def concurrent(self) -> bool:
        """Whether two units of work run on two connections at once (an in-memory SQLite database is
        one connection shared by all, so a second unit of work would join the first's transaction)."""
        ...

    @property
    def writers_side_by_side(self) -> bool:
        """Whether two writing units of work make progress at the same time (PostgreSQL locks rows),
        rather than one waiting for the other to commit (SQLite has one write lock per database)."""
        ...

    def reader_beside_writer(self) -> AbstractAsyncContextManager[tuple[UnitOfWork | None, UnitOfWork]]:
        """A read-only unit of work on a connection of its own beside a writing one, for a use case that
        reads at length while it writes (the reader is None where the two could not run side by side).

        Holding one connection while waiting for another is how a pool deadlocks: every caller holds a
        reader and none can get a writer. So only a bounded number of callers hold a pair at once; the
        others wait their turn before taking either connection."""
        ...
