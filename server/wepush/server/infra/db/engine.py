"""Async engines for the two supported databases.

SQLite (standalone): aiosqlite, WAL, ``busy_timeout``, foreign keys on, a small pool. SQLAlchemy, not the
driver, emits ``BEGIN``: write transactions use ``BEGIN IMMEDIATE`` so that concurrent writers queue on the
busy timeout instead of failing when a read lock cannot be upgraded; read-only units of work use a
deferred ``BEGIN`` so readers never block writers in WAL mode. Each connection also registers
``wepush_lower()``, PostgreSQL's Unicode ``lower()`` for case-insensitive filters (``_text_match.py``).

PostgreSQL (server mode): asyncpg with a configurable pool.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.util import await_

from wepush.server.domain import canonical_json

from ._text_match import SQLITE_LOWER, postgres_lower

T = TypeVar("T")

READ_ONLY_OPTION = "wepush_read_only"
"""Connection execution option set by read-only units of work."""

#: How long a SQLite writer waits for the one write lock. Commits of large imports hold it for seconds
#: (about 1.5 s per 200,000 rows), and a few of them at once must queue, not fail.
SQLITE_BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """Connection pool sizing; ``None`` picks the per-database default (5 for SQLite, 10 for PostgreSQL)."""

    size: int | None = None
    max_overflow: int | None = None
    timeout_seconds: float = 30.0
    recycle_seconds: int = 1800
    connect_timeout_seconds: float = 10.0
    """PostgreSQL: how long opening a connection may take (asyncpg waits 60 s by default)."""
    ping_timeout_seconds: float = 3.0
    """PostgreSQL: how long the liveness check of a pooled connection at checkout may take."""
    dead_peer_seconds: int = 30
    """PostgreSQL over TCP: how long a server that stopped answering at the network level (no ACKs, no
    keepalive replies) may keep a connection, and the statement waiting on it, before it is dropped."""


def normalize_database_url(url: str | URL) -> URL:
    """Accept ``sqlite:///…`` and ``postgresql://…`` and select the async drivers."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg")
    raise ValueError(f"unsupported database {backend!r}: use sqlite or postgresql")


def create_database(url: str | URL, *, pool: PoolSettings | None = None, echo: bool = False) -> AsyncEngine:
    """Create the async engine for ``url`` (not connected yet; dispose it on shutdown)."""
    pool = pool or PoolSettings()
    sa_url = normalize_database_url(url)
    if sa_url.get_backend_name() == "sqlite":
        return _create_sqlite(sa_url, pool, echo)
    engine = create_async_engine(
        sa_url,
        echo=echo,
        pool_size=pool.size if pool.size is not None else 10,
        max_overflow=pool.max_overflow if pool.max_overflow is not None else 10,
        pool_timeout=pool.timeout_seconds,
        pool_recycle=pool.recycle_seconds,
        connect_args={"timeout": pool.connect_timeout_seconds},
        json_serializer=canonical_json,
    )
    event.listen(engine.sync_engine, "checkout", _PostgresPing(pool.ping_timeout_seconds))
    event.listen(engine.sync_engine, "connect", _DeadPeerDetection(pool.dead_peer_seconds))
    return engine


class _DeadPeerDetection:
    """TCP keepalives and a user timeout on every PostgreSQL connection.

    The checkout ping bounds a stall met *before* a transaction; a server lost while a statement is
    under way (a partition, a host that froze or vanished) otherwise held that statement, its request and
    its pooled connection for ever: an answer is awaited with nothing unacknowledged on the wire, so the
    kernel never gives up. Keepalive probes notice the silence and ``TCP_USER_TIMEOUT`` drops the
    connection when sent data (a statement, a probe) stays unacknowledged that long. A server merely busy
    with a long statement (an import's commit may take minutes) still answers the probes, so no statement
    is cut short for being slow. Unix-domain sockets have no peer to lose and are left alone.
    """

    def __init__(self, seconds: int) -> None:
        self._seconds = max(3, seconds)

    def __call__(self, dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # asyncpg exposes no socket options: its transport's socket is the documented asyncio way in.
        transport = getattr(dbapi_connection.driver_connection, "_transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        idle = max(1, self._seconds // 3)
        interval = max(1, self._seconds // 9)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in (
            ("TCP_KEEPIDLE", idle),
            ("TCP_KEEPINTVL", interval),
            ("TCP_KEEPCNT", 3),
            ("TCP_USER_TIMEOUT", self._seconds * 1000),
        ):
            if hasattr(socket, option):  # Linux has all four; other systems some
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class _PostgresPing:
    """The pool's liveness check of a connection at checkout, with a deadline.

    SQLAlchemy's own ``pool_pre_ping`` waits for the answer without one: a database that stalls (a
    network partition, a frozen host: connections open, nothing answered) held every request for as
    long as the stall lasted, or the kernel's retransmission timeout (about 15 minutes). With a deadline
    the connection is dropped and a new one tried (bounded by the connect timeout), so a request fails
    as ``DatabaseUnavailable`` (503 with Retry-After) within seconds. A server lost later, while a
    statement is under way, is ``_DeadPeerDetection``'s: no deadline fits every statement, as an import's
    commit may rightly run for minutes.
    """

    def __init__(self, timeout_seconds: float) -> None:
        self._timeout = timeout_seconds

    def __call__(self, dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: Any) -> None:
        driver = dbapi_connection.driver_connection
        try:
            # Checkout runs in SQLAlchemy's greenlet bridge: await_ drives the driver's coroutine.
            await_(driver.execute("SELECT 1", timeout=self._timeout))
        except Exception as error:
            # The pool drops this connection and opens another (which fails fast if the server is gone).
            raise sa_exc.DisconnectionError(f"the liveness check failed: {type(error).__name__}") from error


def _create_sqlite(url: URL, pool: PoolSettings, echo: bool) -> AsyncEngine:
    in_memory = url.database in (None, "", ":memory:")
    kwargs: dict[str, Any] = {"echo": echo}
    if not in_memory:
        kwargs.update(
            pool_size=pool.size if pool.size is not None else 5,
            max_overflow=pool.max_overflow if pool.max_overflow is not None else 0,
            pool_timeout=pool.timeout_seconds,
        )
    engine = create_async_engine(url, **kwargs)
    event.listen(engine.sync_engine, "connect", _configure_sqlite_connection)
    event.listen(engine.sync_engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Take transaction control away from the driver so that BEGIN IMMEDIATE and SAVEPOINT behave.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()
    # SQLite's lower() folds ASCII only; name filters use this one so they match what PostgreSQL matches.
    dbapi_connection.create_function(SQLITE_LOWER, 1, postgres_lower, deterministic=True)


#: SQLite's words for a database it cannot write at all: a full disk, a failing one, a read-only file.
_SQLITE_UNUSABLE = ("database or disk is full", "disk i/o error", "attempt to write a readonly database")
#: PostgreSQL SQLSTATE classes and codes of a server that is gone or refusing work, not of a bad
#: statement: connection exceptions (08), insufficient resources (53), operator intervention (57P01..03).
_PG_UNAVAILABLE_STATES = ("08", "53", "57P01", "57P02", "57P03")


def is_database_unavailable(error: BaseException, *, connecting: bool = False) -> bool:
    """Whether ``error`` says the database cannot be used now (an outage), rather than that a statement
    was wrong: no connection, a connection lost, a server shutting down or out of connections, the pool
    exhausted, or SQLite's disk full or read-only. A bare ``OSError`` counts only while ``connecting``:
    raised inside a transaction it may be any file's."""
    if isinstance(error, sa_exc.TimeoutError):
        return True  # the pool had no connection to give within its timeout
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if not isinstance(error, sa_exc.DBAPIError) and not connecting:
        return False
    cause = getattr(error, "orig", None) or error
    if isinstance(cause, (OSError, asyncio.TimeoutError)):
        return True  # refused, unreachable, a socket that is not there, a connect that timed out
    state = getattr(cause, "sqlstate", None)
    if isinstance(state, str) and state.startswith(_PG_UNAVAILABLE_STATES):
        return True
    if (
        type(cause).__name__ in ("ConnectionDoesNotExistError", "InterfaceError")
        and "connection" in str(cause).lower()
    ):
        return True
    text = str(cause).lower()
    return any(words in text for words in _SQLITE_UNUSABLE)


#: The name Python gives each aiosqlite connection's worker thread ("Thread-N (<target>)").
_AIOSQLITE_WORKER = "_connection_worker_thread"


def run_database_task(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)``, then wait (a second at most) for aiosqlite's worker threads to end before
    the loop closes. aiosqlite stops the thread of a connection that failed to open without waiting for
    it, and that thread's last callback, reaching a closed loop, printed a traceback after a command's
    one-line error ("unable to open database file")."""

    async def settled() -> T:
        try:
            return await work
        finally:
            for _ in range(100):
                if not any(_AIOSQLITE_WORKER in thread.name for thread in threading.enumerate()):
                    break
                await asyncio.sleep(0.01)

    return asyncio.run(settled())


def is_sqlite_busy(error: BaseException) -> bool:
    """Whether ``error`` (a driver's or SQLAlchemy's) is SQLite giving up on a lock after its busy timeout."""
    text = str(getattr(error, "orig", None) or error)
    return "database is locked" in text or "database is busy" in text


def _begin_sqlite_transaction(connection: Connection) -> None:
    read_only = bool(connection.get_execution_options().get(READ_ONLY_OPTION, False))
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


__all__ = [
    "READ_ONLY_OPTION",
    "SQLITE_BUSY_TIMEOUT_MS",
    "PoolSettings",
    "create_database",
    "is_database_unavailable",
    "is_sqlite_busy",
    "normalize_database_url",
    "run_database_task",
]
