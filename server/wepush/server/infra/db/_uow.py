"""``SqlUnitOfWork``: one connection, one transaction, every repository bound to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType

from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction
from sqlalchemy.pool import Pool, QueuePool, SingletonThreadPool, StaticPool

from wepush.server.domain import Clock, DatabaseBusy, DatabaseUnavailable, utc_now

from ._repo_agents import SqlAgentOutboxRepository, SqlAgentRepository
from ._repo_audience import SqlAudienceImportRepository, SqlAudienceRepository
from ._repo_events import SqlRunCommandRepository, SqlRunEventRepository
from ._repo_leases import SqlLeaseRepository
from ._repo_records import SqlArtifactRepository, SqlAuditRepository, SqlIdempotencyRepository
from ._repo_resources import (
    SqlAccountRepository,
    SqlJobRepository,
    SqlMessageRepository,
    SqlScheduleRepository,
)
from ._repo_runs import SqlRunItemRepository, SqlRunRepository
from ._repo_workspace import SqlApiTokenRepository, SqlSecretRecordRepository, SqlWorkspaceRepository
from .engine import READ_ONLY_OPTION, is_database_unavailable, is_sqlite_busy


async def _close_quietly(conn: AsyncConnection) -> None:
    """Give the connection back; one the server dropped may fail to close, which changes nothing."""
    with contextlib.suppress(Exception):
        await conn.close()


class _Repositories:
    def __init__(self, conn: AsyncConnection, clock: Clock) -> None:
        self.workspaces = SqlWorkspaceRepository(conn, clock)
        self.api_tokens = SqlApiTokenRepository(conn, clock)
        self.secret_records = SqlSecretRecordRepository(conn, clock)
        self.accounts = SqlAccountRepository(conn, clock)
        self.messages = SqlMessageRepository(conn, clock)
        self.audiences = SqlAudienceRepository(conn, clock)
        self.audience_imports = SqlAudienceImportRepository(conn, clock)
        self.jobs = SqlJobRepository(conn, clock)
        self.schedules = SqlScheduleRepository(conn, clock)
        self.runs = SqlRunRepository(conn, clock)
        self.run_items = SqlRunItemRepository(conn, clock)
        self.run_events = SqlRunEventRepository(conn, clock)
        self.run_commands = SqlRunCommandRepository(conn, clock)
        self.agents = SqlAgentRepository(conn, clock)
        self.leases = SqlLeaseRepository(conn, clock)
        self.agent_outbox = SqlAgentOutboxRepository(conn, clock)
        self.artifacts = SqlArtifactRepository(conn, clock)
        self.audit = SqlAuditRepository(conn, clock)
        self.idempotency = SqlIdempotencyRepository(conn, clock)


class SqlUnitOfWork:
    """``async with SqlUnitOfWork(engine) as uow:`` — commit on clean exit, roll back on exception.

    A connection is taken from the pool per transaction and returned at the end; nothing transactional
    is shared between units of work. An instance may be entered again after it has exited.
    """

    def __init__(self, engine: AsyncEngine, *, clock: Clock = utc_now, read_only: bool = False) -> None:
        self._engine = engine
        self._clock = clock
        self._read_only = read_only
        self._conn: AsyncConnection | None = None
        self._tx: AsyncTransaction | None = None
        self._repos: _Repositories | None = None

    async def __aenter__(self) -> SqlUnitOfWork:
        if self._conn is not None:
            raise RuntimeError("this unit of work is already in a transaction")
        try:
            conn = await self._engine.connect()
        except Exception as error:
            if is_database_unavailable(error, connecting=True):
                raise DatabaseUnavailable() from error
            raise
        try:
            if self._read_only:
                conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
            self._tx = await conn.begin()
        except OperationalError as error:
            await _close_quietly(conn)
            if is_sqlite_busy(error):
                raise DatabaseBusy() from None
            if is_database_unavailable(error):
                raise DatabaseUnavailable() from error
            raise
        except BaseException:
            await _close_quietly(conn)
            raise
        self._conn = conn
        self._repos = _Repositories(conn, self._clock)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, tx = self._conn, self._tx
        self._conn = self._tx = None
        self._repos = None
        if conn is None or tx is None:
            return
        try:
            if exc_type is None:
                await tx.commit()
            else:
                await tx.rollback()
        except Exception as error:
            # A lost connection fails the rollback too: what the caller is told is the outage.
            await _close_quietly(conn)
            if is_database_unavailable(error):
                raise DatabaseUnavailable() from error
            if exc is None:
                raise
            return
        await conn.close()
        if exc is not None and is_database_unavailable(exc) and not isinstance(exc, DatabaseUnavailable):
            # The outage met inside the transaction, told as one (503, Retry-After), not as a fault.
            raise DatabaseUnavailable() from exc

    @property
    def _r(self) -> _Repositories:
        if self._repos is None:
            raise RuntimeError("repositories are only usable inside 'async with unit_of_work:'")
        return self._repos

    @property
    def workspaces(self) -> SqlWorkspaceRepository:
        return self._r.workspaces

    @property
    def api_tokens(self) -> SqlApiTokenRepository:
        return self._r.api_tokens

    @property
    def secret_records(self) -> SqlSecretRecordRepository:
        return self._r.secret_records

    @property
    def accounts(self) -> SqlAccountRepository:
        return self._r.accounts

    @property
    def messages(self) -> SqlMessageRepository:
        return self._r.messages

    @property
    def audiences(self) -> SqlAudienceRepository:
        return self._r.audiences

    @property
    def audience_imports(self) -> SqlAudienceImportRepository:
        return self._r.audience_imports

    @property
    def jobs(self) -> SqlJobRepository:
        return self._r.jobs

    @property
    def schedules(self) -> SqlScheduleRepository:
        return self._r.schedules

    @property
    def runs(self) -> SqlRunRepository:
        return self._r.runs

    @property
    def run_items(self) -> SqlRunItemRepository:
        return self._r.run_items

    @property
    def run_events(self) -> SqlRunEventRepository:
        return self._r.run_events

    @property
    def run_commands(self) -> SqlRunCommandRepository:
        return self._r.run_commands

    @property
    def agents(self) -> SqlAgentRepository:
        return self._r.agents

    @property
    def leases(self) -> SqlLeaseRepository:
        return self._r.leases

    @property
    def agent_outbox(self) -> SqlAgentOutboxRepository:
        return self._r.agent_outbox

    @property
    def artifacts(self) -> SqlArtifactRepository:
        return self._r.artifacts

    @property
    def audit(self) -> SqlAuditRepository:
        return self._r.audit

    @property
    def idempotency(self) -> SqlIdempotencyRepository:
        return self._r.idempotency


class SqlUnitOfWorkFactory:
    """The composition root's :class:`~wepush.server.domain.UnitOfWorkFactory` for one engine."""

    def __init__(self, engine: AsyncEngine, *, clock: Clock = utc_now) -> None:
        self._engine = engine
        self._clock = clock
        capacity = _pool_capacity(engine.sync_engine.pool)
        # Pairs may take at most half the pool, so single-connection requests are still served; with
        # fewer than two connections in all, a pair could wait for itself.
        self._pair_slots = asyncio.Semaphore(max(1, capacity // 4)) if capacity >= 2 else None

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def clock(self) -> Clock:
        """The clock the repositories stamp rows with."""
        return self._clock

    @property
    def concurrent(self) -> bool:
        return not isinstance(self._engine.sync_engine.pool, StaticPool | SingletonThreadPool)

    @property
    def writers_side_by_side(self) -> bool:
        return self.concurrent and self._engine.dialect.name != "sqlite"

    def __call__(self, *, read_only: bool = False) -> SqlUnitOfWork:
        return SqlUnitOfWork(self._engine, clock=self._clock, read_only=read_only)

    @asynccontextmanager
    async def reader_beside_writer(self) -> AsyncIterator[tuple[SqlUnitOfWork | None, SqlUnitOfWork]]:
        if not self.concurrent or self._pair_slots is None:
            async with self() as writer:
                yield None, writer
            return
        # The reader first: on SQLite a writer holding the write lock must never wait for a pooled
        # connection held by writers queued behind that lock.
        async with self._pair_slots, self(read_only=True) as reader, self() as writer:
            yield reader, writer


def _pool_capacity(pool: Pool) -> int:
    """How many connections the pool hands out at most (a large number where it has no bound)."""
    if isinstance(pool, QueuePool):
        overflow = pool._max_overflow
        return 1_000_000 if overflow < 0 else pool.size() + overflow
    return 1_000_000
