"""``SqliteExecutionLedger``: an executing run's hot statements on SQLite, run on the event loop itself.

Through SQLAlchemy and aiosqlite every statement costs three or four round trips between the event
loop and the connection's thread (cursor, execute, fetch, close), a write transaction a dozen, and the
thread gives up the GIL for every row it steps through. On a loop busy with sending, each round trip
waits for the loop's next turn and each GIL hand-off for the loop's switch interval, so a 500-row read
took 20-700 ms and SQLite's single write lock was held across all the turns of a write transaction, with
result appends, dispatch marks and event publishes queueing behind each other.

Here the ledger keeps one plain ``sqlite3`` connection of its own and runs each operation synchronously
on the loop: a short, bounded piece of C work (a page read, a ``BEGIN IMMEDIATE`` … ``COMMIT`` of one
insert or update) with no round trip at all. It never blocks on the write lock: its busy timeout is 0,
and while another connection holds the lock it waits with ``asyncio.sleep`` and tries again, up to the
engine's busy timeout. It never checkpoints the WAL either (``wal_autocheckpoint=0``); the pool's
connections do that in their own threads as they commit.

Only the common case takes this path. Anything unusual (a batch with an item already stored, a run that
is no longer executing) is handed to the reference ``UnitOfWorkLedger``, which has the full semantics and
raises the precise domain error; the fast path itself only ever commits a plain insert or a rising mark
after proving the fence in the same transaction.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from wepush.server.application.execution import ExecutionLedger, RecipientScope, UnitOfWorkLedger
from wepush.server.domain import (
    MAX_PAGE_LIMIT,
    TERMINAL_RUN_STATES,
    ItemResult,
    LeaseExpired,
    LeaseFence,
    LeaseState,
    Page,
    Recipient,
    UnitOfWorkFactory,
)

from ._repo_runs import INSERT_ITEMS_SQLITE, item_rows, sqlite_instant
from ._uow import SqlUnitOfWorkFactory
from .engine import SQLITE_BUSY_TIMEOUT_MS

__all__ = ["SqliteExecutionLedger", "execution_ledger"]

T = TypeVar("T")

_FENCE = (
    "SELECT 1 FROM agent_lease WHERE id = ? AND epoch = ? AND fencing_token_hash = ? AND state = ? "
    "AND expires_at > ?"
)
_TERMINAL = json.dumps(sorted(s.value for s in TERMINAL_RUN_STATES))
_MARK = (
    "UPDATE run SET dispatched_through_sequence = CASE WHEN dispatched_through_sequence < ? THEN ? "
    "ELSE dispatched_through_sequence END WHERE id = ? AND workspace_id = ? "
    "AND state NOT IN (SELECT value FROM json_each(?))"
)
_RECIPIENTS = (
    "SELECT sequence, item_key, fields_json FROM audience_recipient WHERE snapshot_id = ? AND sequence > ? "
    "ORDER BY sequence LIMIT ?"
)
_RETRY_RECIPIENTS = (
    "SELECT r.sequence, r.item_key, r.fields_json FROM audience_recipient AS r "
    "JOIN run_retry_item AS t ON t.run_id = ? AND t.sequence = r.sequence "
    "WHERE r.snapshot_id = ? AND r.sequence > ? ORDER BY r.sequence LIMIT ?"
)


class _NotTheCommonCase(Exception):
    """The fast path declined; nothing was written and the reference ledger takes over."""


def _is_busy(error: sqlite3.OperationalError) -> bool:
    text = str(error)
    return "database is locked" in text or "database is busy" in text


def _check_fence(db: sqlite3.Connection, fence: LeaseFence, now: datetime) -> None:
    held = db.execute(
        _FENCE, (fence.lease_id, fence.epoch, fence.token.hash, LeaseState.ACTIVE.value, sqlite_instant(now))
    ).fetchone()
    if held is None:
        raise LeaseExpired(fence.lease_id)


class SqliteExecutionLedger:
    """The :class:`~wepush.server.application.execution.ExecutionLedger` for a file-backed SQLite engine.

    Owned by whoever built it (the embedded agent): ``close`` it when done.
    """

    def __init__(
        self, uow: SqlUnitOfWorkFactory, *, busy_timeout: float = SQLITE_BUSY_TIMEOUT_MS / 1000
    ) -> None:
        url = uow.engine.url
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            raise ValueError("SqliteExecutionLedger needs a file-backed SQLite database")
        self._path = url.database
        self._clock = uow.clock
        self._busy_timeout = busy_timeout
        self._reference: ExecutionLedger = UnitOfWorkLedger(uow)
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            for pragma in (
                "journal_mode=WAL",
                "busy_timeout=0",
                "foreign_keys=ON",
                "synchronous=NORMAL",
                "wal_autocheckpoint=0",
            ):
                db.execute(f"PRAGMA {pragma}")
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def _run(self, work: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``work`` on the loop; while the database is busy, sleep and try again (never block)."""
        db = self._connection()
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.0005
        while True:
            try:
                if not write:
                    return work(db)
                db.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as error:
                if not _is_busy(error) or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        # From here to COMMIT nothing awaits: no other coroutine can use the connection in between.
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return result

    async def read_recipients(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[Recipient, int]:
        limit = max(1, min(limit, MAX_PAGE_LIMIT))
        start = 0 if after is None else after
        snapshot_id = scope.snapshot_id
        params: tuple[str | int, ...]
        if scope.resend:
            sql, params = _RETRY_RECIPIENTS, (scope.run_id, snapshot_id, start, limit + 1)
        else:
            sql, params = _RECIPIENTS, (snapshot_id, start, limit + 1)

        def read(db: sqlite3.Connection) -> list[tuple[int, str, str]]:
            # Autocommit mode: one SELECT is one read transaction, which never waits for the writer.
            return db.execute(sql, params).fetchall()

        rows = await self._run(read, write=False)
        loads = json.loads
        items = [
            Recipient(snapshot_id=snapshot_id, sequence=sequence, item_key=key, fields=loads(fields))
            for sequence, key, fields in rows[:limit]
        ]
        return Page(items, items[-1].sequence if len(rows) > limit else None)

    async def mark_dispatched(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, through_sequence: int
    ) -> None:
        params = (through_sequence, through_sequence, run_id, workspace_id, _TERMINAL)

        def mark(db: sqlite3.Connection) -> None:
            _check_fence(db, fence, now)
            if db.execute(_MARK, params).rowcount != 1:
                raise _NotTheCommonCase

        try:
            await self._run(mark, write=True)
        except _NotTheCommonCase:
            # The run is terminal or gone: the reference ledger raises the precise domain error.
            await self._reference.mark_dispatched(fence, now, workspace_id, run_id, through_sequence)

    async def record_results(
        self, fence: LeaseFence, now: datetime, workspace_id: str, run_id: str, results: Sequence[ItemResult]
    ) -> None:
        if not results:
            return
        latest: dict[str, ItemResult] = {}
        for result in results:
            kept = latest.get(result.item_id)
            if kept is None or result.attempt > kept.attempt:
                latest[result.item_id] = result
        # Stamped by the repositories' clock, as the reference path stamps them.
        rows = item_rows(workspace_id, run_id, latest.values(), self._clock(), sqlite_instant)

        def insert(db: sqlite3.Connection) -> None:
            _check_fence(db, fence, now)
            try:
                db.executemany(INSERT_ITEMS_SQLITE, rows)
            except sqlite3.IntegrityError as error:
                if "UNIQUE constraint failed" in str(error):
                    raise _NotTheCommonCase from error
                raise

        try:
            await self._run(insert, write=True)
        except _NotTheCommonCase:
            # Some item was delivered before (a retried append): the conditional upsert decides per item.
            await self._reference.record_results(fence, now, workspace_id, run_id, list(latest.values()))


def execution_ledger(uow: UnitOfWorkFactory) -> SqliteExecutionLedger | UnitOfWorkLedger:
    """The ledger for ``uow``'s database: the loop-side one on file-backed SQLite, the reference elsewhere."""
    if isinstance(uow, SqlUnitOfWorkFactory):
        url = uow.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return SqliteExecutionLedger(uow)
    return UnitOfWorkLedger(uow)
