"""``SqliteExecutionLedger``: an executing run's hot statements on SQLite, without driver round trips.

Through SQLAlchemy and aiosqlite every statement costs three or four round trips between the event
loop and the connection's thread (cursor, execute, fetch, close), a write transaction a dozen, and the
thread gives up the GIL for every row it steps through. On a loop busy with sending, each round trip
waits for the loop's next turn and each GIL hand-off for the loop's switch interval, so a 500-row read
took 20-700 ms and SQLite's single write lock was held across all the turns of a write transaction, with
result appends, dispatch marks and event publishes queueing behind each other.

Here the ledger keeps plain ``sqlite3`` connections of its own. Recipient reads and dispatch marks run
synchronously on the loop: a short, bounded piece of C work (a page read, a ``BEGIN IMMEDIATE`` …
``COMMIT`` of one update) with no round trip at all. That connection never blocks on the write lock (its
busy timeout is 0: while another connection holds the lock it waits with ``asyncio.sleep`` and tries
again, up to the engine's busy timeout) and never checkpoints the WAL (``wal_autocheckpoint=0``).
Result batches, the one heavy write, go to a second connection on a single append thread as one
``INSERT … SELECT … FROM json_each(?)`` of a JSON array: one SQLite step, during which that thread holds
no GIL, so the B-tree work runs beside the loop; that thread may wait for the lock and checkpoints.

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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import RecipientRecord
from wepush.server.application.execution import (
    ExecutionLedger,
    RecipientScope,
    UnitOfWorkLedger,
    recipient_fields_record,
    storable_text,
)
from wepush.server.domain import (
    EXTERNAL_REQUEST_ID_MAX_CHARS,
    MAX_PAGE_LIMIT,
    PROVIDER_CODE_MAX_CHARS,
    TERMINAL_RUN_STATES,
    LeaseExpired,
    LeaseFence,
    LeaseState,
    Page,
    UnitOfWorkFactory,
    new_id,
)

from ._repo_runs import ITEM_COLUMNS, sqlite_instant
from ._uow import SqlUnitOfWorkFactory
from .engine import SQLITE_BUSY_TIMEOUT_MS, is_sqlite_busy

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
    "SELECT sequence, fields_json FROM audience_recipient WHERE snapshot_id = ? AND sequence > ? "
    "ORDER BY sequence LIMIT ?"
)
_RETRY_RECIPIENTS = (
    "SELECT r.sequence, r.fields_json FROM audience_recipient AS r "
    "JOIN run_retry_item AS t ON t.run_id = ? AND t.sequence = r.sequence "
    "WHERE r.snapshot_id = ? AND r.sequence > ? ORDER BY r.sequence LIMIT ?"
)


_INSERT_ITEMS_FROM_JSON = (  # column names and positions only: no value is ever spliced in
    f"INSERT INTO run_item ({', '.join(ITEM_COLUMNS)}) "  # noqa: S608
    f"SELECT {', '.join(f'value ->> {n}' for n in range(len(ITEM_COLUMNS)))} FROM json_each(?)"
)
_json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _item_rows(
    workspace_id: str, run_id: str, results: Iterable[EngineItemResult], now: datetime
) -> list[tuple[Any, ...]]:
    """``stored_result`` of each result as a ``run_item`` row in ``ITEM_COLUMNS`` order, stamped ``now``
    by the repositories' clock as the reference path stamps them."""
    stamp = sqlite_instant(now)
    return [
        (
            new_id(),
            workspace_id,
            run_id,
            r.item_id,
            r.sequence,
            r.state.value,
            r.attempt,
            None if r.error_category is None else r.error_category.value,
            storable_text(r.provider_code, PROVIDER_CODE_MAX_CHARS),
            storable_text(r.diagnostic),
            storable_text(r.external_request_id, EXTERNAL_REQUEST_ID_MAX_CHARS),
            None if r.finished_at is None else sqlite_instant(r.finished_at),
            stamp,
            stamp,
            1,
        )
        for r in results
    ]


class _NotTheCommonCase(Exception):
    """The fast path declined; nothing was written and the reference ledger takes over."""


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
        self._appender: sqlite3.Connection | None = None
        self._appends: ThreadPoolExecutor | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = self._open(busy_timeout_ms=0, checkpoints=False)
        return self._db

    def _open(self, *, busy_timeout_ms: int, checkpoints: bool) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        for pragma in (
            "journal_mode=WAL",
            f"busy_timeout={busy_timeout_ms}",
            "foreign_keys=ON",
            "synchronous=NORMAL",
            *(() if checkpoints else ("wal_autocheckpoint=0",)),
        ):
            db.execute(f"PRAGMA {pragma}")
        return db

    def _append_thread(self) -> ThreadPoolExecutor:
        if self._appends is None:
            self._appends = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wepush-result-append")
        return self._appends

    def close(self) -> None:
        if self._appends is not None:
            self._appends.shutdown(wait=True)
            self._appends = None
        for db in (self._db, self._appender):
            if db is not None:
                db.close()
        self._db = self._appender = None

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
                if not is_sqlite_busy(error) or time.monotonic() >= deadline:
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

    async def read_records(
        self, scope: RecipientScope, after: int | None, limit: int
    ) -> Page[RecipientRecord, int]:
        limit = max(1, min(limit, MAX_PAGE_LIMIT))
        start = 0 if after is None else after
        snapshot_id, run_id = scope.snapshot_id, scope.run_id
        params: tuple[str | int, ...]
        if scope.resend:
            sql, params = _RETRY_RECIPIENTS, (run_id, snapshot_id, start, limit + 1)
        else:
            sql, params = _RECIPIENTS, (snapshot_id, start, limit + 1)

        def read(db: sqlite3.Connection) -> list[tuple[int, str]]:
            # Autocommit mode: one SELECT is one read transaction, which never waits for the writer.
            return db.execute(sql, params).fetchall()

        rows = await self._run(read, write=False)
        more = len(rows) > limit
        rows = rows[:limit]
        # The stored fields are canonical JSON objects: decoding them as one array is one call into the
        # C decoder instead of one per recipient.
        decoded = json.loads("[" + ",".join(fields for _, fields in rows) + "]") if rows else []
        records = [
            recipient_fields_record(run_id, snapshot_id, sequence, fields)
            for (sequence, _), fields in zip(rows, decoded, strict=True)
        ]
        return Page(records, records[-1].sequence if more else None)

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
        self,
        fence: LeaseFence,
        now: datetime,
        workspace_id: str,
        run_id: str,
        results: Sequence[EngineItemResult],
    ) -> None:
        if not results:
            return
        latest = {r.item_id: r for r in results}
        if len(latest) < len(results):
            # One item reported more than once: keep its latest attempt (the repository's rule).
            latest = {}
            for result in results:
                kept = latest.get(result.item_id)
                if kept is None or result.attempt > kept.attempt:
                    latest[result.item_id] = result
        # All rows travel as one JSON array: the insert is then a single statement, one step of SQLite's
        # in which the append thread holds no GIL, so SQLite's work (five B-trees per row) runs beside
        # the event loop instead of on it.
        rows = _json_text(_item_rows(workspace_id, run_id, latest.values(), self._clock()))

        def insert() -> None:
            if self._appender is None:
                # This thread waits for the write lock itself (busy timeout): it has nothing else to do.
                self._appender = self._open(busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS, checkpoints=True)
            db = self._appender
            db.execute("BEGIN IMMEDIATE")
            try:
                _check_fence(db, fence, now)
                try:
                    db.execute(_INSERT_ITEMS_FROM_JSON, (rows,))
                except sqlite3.IntegrityError as error:
                    if "UNIQUE constraint failed" in str(error):
                        raise _NotTheCommonCase from error
                    raise
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        try:
            await asyncio.get_running_loop().run_in_executor(self._append_thread(), insert)
        except _NotTheCommonCase:
            # Some item was delivered before (a retried append): the conditional upsert decides per item.
            await self._reference.record_results(fence, now, workspace_id, run_id, results)


def execution_ledger(uow: UnitOfWorkFactory) -> SqliteExecutionLedger | UnitOfWorkLedger:
    """The ledger for ``uow``'s database: the loop-side one on file-backed SQLite, the reference elsewhere."""
    if isinstance(uow, SqlUnitOfWorkFactory):
        url = uow.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return SqliteExecutionLedger(uow)
    return UnitOfWorkLedger(uow)
