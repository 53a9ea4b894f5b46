"""Runs (conditional state transitions) and run items (idempotent results, resend sets)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, and_, case, func, insert, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from wepush.server.domain import (
    TERMINAL_RUN_STATES,
    DuplicateResource,
    ItemResult,
    ItemState,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    Recipient,
    RetryItem,
    Run,
    RunCounts,
    RunItem,
    RunState,
    RunStateConflict,
    VersionConflict,
    allowed_commands,
    new_id,
    sources_of,
)

from ._base import SqlRepository, is_unique_violation
from ._mapping import RowMapper
from ._metadata import ID_LENGTH
from ._tables_audience import audience_recipient
from ._tables_runs import run, run_item, run_retry_item
from ._types import UtcDateTime

_RUN = RowMapper(Run, run, renames={"snapshot": "snapshot_json"}, composites=("counts",))
_ITEM = RowMapper(RunItem, run_item)
_RETRY = RowMapper(RetryItem, run_retry_item)
_RECIPIENT = RowMapper(Recipient, audience_recipient, renames={"fields": "fields_json"})

_UNSETTLED_ITEM_STATES = (ItemState.PENDING.value, ItemState.IN_FLIGHT.value)


ITEM_COLUMNS = (
    "id",
    "workspace_id",
    "run_id",
    "item_id",
    "sequence",
    "state",
    "attempt",
    "error_category",
    "provider_code",
    "diagnostic",
    "external_request_id",
    "finished_at",
    "created_at",
    "updated_at",
    "version",
)
_INSERT_ITEMS = f"INSERT INTO run_item ({', '.join(ITEM_COLUMNS)}) VALUES "  # noqa: S608 - constants
# The drivers' own parameter styles: sqlite3's qmark and asyncpg's numbered dollars.
_INSERT_ITEMS_SQLITE = _INSERT_ITEMS + f"({', '.join('?' for _ in ITEM_COLUMNS)})"
_INSERT_ITEMS_POSTGRESQL = _INSERT_ITEMS + f"({', '.join(f'${n}' for n in range(1, len(ITEM_COLUMNS) + 1))})"


def sqlite_instant(value: datetime) -> str:
    """What ``UtcDateTime`` stores on SQLite: naive UTC in SQLAlchemy's fixed-width text format."""
    if value.tzinfo is UTC:
        return value.isoformat(" ", "microseconds")[:-6]  # without the "+00:00"
    if value.utcoffset() is None:
        raise ValueError("naive datetime given where a UTC instant is required")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _as_utc(value: datetime) -> datetime:
    if value.utcoffset() is None:
        raise ValueError("naive datetime given where a UTC instant is required")
    return value.astimezone(UTC)


def item_rows(
    workspace_id: str,
    run_id: str,
    results: Iterable[ItemResult],
    now: datetime,
    instant: Callable[[datetime], Any],
) -> list[tuple[Any, ...]]:
    """``run_item`` rows for first deliveries, as driver parameters in ``ITEM_COLUMNS`` order."""
    stamp = instant(now)
    return [
        (
            new_id(),
            workspace_id,
            run_id,
            r.item_id,
            r.sequence,
            r.state.value,
            r.attempt,
            r.error_category,
            r.provider_code,
            r.diagnostic,
            r.external_request_id,
            None if r.finished_at is None else instant(r.finished_at),
            stamp,
            stamp,
            1,
        )
        for r in results
    ]


def _run_key(r: Run) -> Keyset:
    return Keyset(r.created_at, r.id)


class SqlRunRepository(SqlRepository):
    async def add(self, run_: Run) -> Run:
        await self._insert(
            run, _RUN.to_values(run_), lambda: DuplicateResource("run", "idempotency key already used")
        )
        return run_

    async def get(self, workspace_id: str, run_id: str, *, referencing: bool = False) -> Run:
        row = await self._get_row(
            run, "run", run_id, run.c.workspace_id == workspace_id, lock="share" if referencing else None
        )
        return _RUN.from_row(row)

    async def find_by_confirmation(self, workspace_id: str, digest: str) -> Run | None:
        row = await self._one(
            select(run).where(run.c.workspace_id == workspace_id, run.c.confirmation_digest == digest)
        )
        return None if row is None else _RUN.from_row(row)

    async def find_by_idempotency_key(self, workspace_id: str, key_hash: str) -> Run | None:
        row = await self._one(
            select(run).where(run.c.workspace_id == workspace_id, run.c.idempotency_key_hash == key_hash)
        )
        return None if row is None else _RUN.from_row(row)

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        states: Collection[RunState] | None = None,
        job_id: str | None = None,
    ) -> Page[Run, Keyset]:
        stmt = select(run).where(run.c.workspace_id == workspace_id)
        if states is not None:
            stmt = stmt.where(run.c.state.in_([s.value for s in states]))
        if job_id is not None:
            stmt = stmt.where(run.c.job_id == job_id)
        return await self._keyset_page(
            stmt, page, at=run.c.created_at, id_=run.c.id, build=_RUN.from_row, key=_run_key
        )

    async def scan(self, states: Collection[RunState], page: PageRequest[Keyset]) -> Page[Run, Keyset]:
        return await self._keyset_page(
            select(run).where(run.c.state.in_([s.value for s in states])),
            page,
            at=run.c.created_at,
            id_=run.c.id,
            build=_RUN.from_row,
            key=_run_key,
            descending=False,
        )

    async def transition(
        self,
        workspace_id: str,
        run_id: str,
        *,
        expected_version: int,
        target: RunState,
        reason: str | None = None,
    ) -> Run:
        now = self._clock()
        sources = sources_of(target)
        values: dict[str, Any] = {
            "state": target.value,
            "state_reason": reason,
            "updated_at": now,
            "version": run.c.version + 1,
        }
        if target is RunState.RUNNING:
            values["started_at"] = func.coalesce(run.c.started_at, literal(now, UtcDateTime()))
        elif target is RunState.PENDING:
            # Queued again by a recovery, nothing dispatched: it starts anew when an agent runs it, and a
            # cancel meanwhile is one before start (``Run.cancelled_before_start``), ended by the Service.
            values["started_at"] = None
        if target in TERMINAL_RUN_STATES:
            values["ended_at"] = now
        row = await self._one(
            update(run)
            .where(
                run.c.id == run_id,
                run.c.workspace_id == workspace_id,
                run.c.state.in_([s.value for s in sources]),
                run.c.version == expected_version,
            )
            .values(**values)
            .returning(*run.c)
        )
        if row is not None:
            return _RUN.from_row(row)
        current = await self._current_state(workspace_id, run_id)
        if current not in sources:
            raise RunStateConflict(run_id, current, f"move to {target.value}", allowed_commands(current))
        raise VersionConflict("run", run_id, expected_version)

    async def record_progress(
        self, workspace_id: str, run_id: str, *, counts: RunCounts, current_concurrency: int
    ) -> Run:
        terminal = [s.value for s in TERMINAL_RUN_STATES]
        row = await self._one(
            update(run)
            .where(run.c.id == run_id, run.c.workspace_id == workspace_id, run.c.state.not_in(terminal))
            .values(
                total=counts.total,
                succeeded=counts.succeeded,
                failed=counts.failed,
                unknown=counts.unknown,
                unsent=counts.unsent,
                skipped=counts.skipped,
                retried=counts.retried,
                current_concurrency=current_concurrency,
                updated_at=self._clock(),
            )
            .returning(*run.c)
        )
        if row is not None:
            return _RUN.from_row(row)
        current = await self._current_state(workspace_id, run_id)
        raise RunStateConflict(run_id, current, "record progress", allowed_commands(current))

    async def mark_dispatched(self, workspace_id: str, run_id: str, *, through_sequence: int) -> int:
        terminal = [s.value for s in TERMINAL_RUN_STATES]
        mark = run.c.dispatched_through_sequence
        # CASE rather than GREATEST/MAX: one spelling both databases accept, and the mark never goes down.
        stored = await self._conn.scalar(
            update(run)
            .where(run.c.id == run_id, run.c.workspace_id == workspace_id, run.c.state.not_in(terminal))
            .values(
                dispatched_through_sequence=case(
                    (mark < through_sequence, literal(through_sequence)), else_=mark
                )
            )
            .returning(mark)
        )
        if stored is not None:
            return int(stored)
        current = await self._current_state(workspace_id, run_id)
        raise RunStateConflict(run_id, current, "record dispatch", allowed_commands(current))

    async def dispatch_mark(self, workspace_id: str, run_id: str) -> int:
        stored = await self._conn.scalar(
            select(run.c.dispatched_through_sequence).where(
                run.c.id == run_id, run.c.workspace_id == workspace_id
            )
        )
        if stored is None:
            raise NotFound("run", run_id)
        return int(stored)

    async def _current_state(self, workspace_id: str, run_id: str) -> RunState:
        state = await self._conn.scalar(
            select(run.c.state).where(run.c.id == run_id, run.c.workspace_id == workspace_id)
        )
        if state is None:
            raise NotFound("run", run_id)
        return RunState(state)


class SqlRunItemRepository(SqlRepository):
    async def record_results(self, workspace_id: str, run_id: str, results: Sequence[ItemResult]) -> int:
        """Store each item's outcome, idempotently: a newer attempt replaces an older one, the same attempt
        only settles an item still PENDING/IN_FLIGHT, anything else is left as it is.

        Almost every batch holds items this run has not recorded yet (their first delivery), so it is
        first tried as one plain driver-level ``INSERT`` executemany of pre-built tuples inside a
        savepoint. A unique violation means the batch, or part of it, was delivered before (a retried
        append, a recovery settling what an executor left): the savepoint is rolled back and the batch
        goes through the conditional upsert instead.
        """
        if not results:
            return 0
        now = self._clock()
        # One statement may not touch a row twice (PostgreSQL refuses), so keep each item's latest attempt.
        latest: dict[str, ItemResult] = {}
        for result in results:
            kept = latest.get(result.item_id)
            if kept is None or result.attempt > kept.attempt:
                latest[result.item_id] = result
        if await self._insert_new(workspace_id, run_id, latest.values(), now):
            return len(latest)
        return await self._upsert(workspace_id, run_id, latest.values(), now)

    async def _insert_new(
        self, workspace_id: str, run_id: str, results: Collection[ItemResult], now: datetime
    ) -> bool:
        """The first-delivery fast path; ``False`` (and nothing written) if any item is already stored."""
        instant: Callable[[datetime], Any]
        if self._is_postgresql:
            sql, instant = _INSERT_ITEMS_POSTGRESQL, _as_utc
        else:
            sql, instant = _INSERT_ITEMS_SQLITE, sqlite_instant
        rows = item_rows(workspace_id, run_id, results, now, instant)
        try:
            async with self._conn.begin_nested():
                await self._conn.exec_driver_sql(sql, rows)
        except IntegrityError as error:
            if is_unique_violation(error):
                return False
            raise
        return True

    async def _upsert(
        self, workspace_id: str, run_id: str, results: Collection[ItemResult], now: datetime
    ) -> int:
        params = [
            {
                "id": new_id(),
                "workspace_id": workspace_id,
                "run_id": run_id,
                "item_id": r.item_id,
                "sequence": r.sequence,
                "state": r.state.value,
                "attempt": r.attempt,
                "error_category": r.error_category,
                "provider_code": r.provider_code,
                "diagnostic": r.diagnostic,
                "external_request_id": r.external_request_id,
                "finished_at": r.finished_at,
                "created_at": now,
                "updated_at": now,
                "version": 1,
            }
            for r in results
        ]
        stmt = (postgresql.insert if self._is_postgresql else sqlite.insert)(run_item)
        excluded = stmt.excluded
        upsert = stmt.on_conflict_do_update(
            index_elements=[run_item.c.run_id, run_item.c.item_id],
            set_={
                name: excluded[name]
                for name in (
                    "sequence",
                    "state",
                    "attempt",
                    "error_category",
                    "provider_code",
                    "diagnostic",
                    "external_request_id",
                    "finished_at",
                    "updated_at",
                )
            }
            | {"version": run_item.c.version + 1},
            # A newer attempt wins; the same attempt only settles an item still PENDING/IN_FLIGHT.
            where=or_(
                run_item.c.attempt < excluded.attempt,
                and_(
                    run_item.c.attempt == excluded.attempt,
                    # Spelled out: expanding IN lists cannot be used with executemany.
                    or_(*(run_item.c.state == s for s in _UNSETTLED_ITEM_STATES)),
                    *(excluded.state != s for s in _UNSETTLED_ITEM_STATES),
                ),
            ),
        ).returning(run_item.c.id)
        written = (await self._conn.execute(upsert, params)).all()
        return len(written)

    async def get(self, run_id: str, item_id: str) -> RunItem | None:
        row = await self._one(
            select(run_item).where(run_item.c.run_id == run_id, run_item.c.item_id == item_id)
        )
        return None if row is None else _ITEM.from_row(row)

    async def list_page(
        self, run_id: str, page: PageRequest[int], *, states: Collection[ItemState] | None = None
    ) -> Page[RunItem, int]:
        stmt = select(run_item).where(run_item.c.run_id == run_id)
        if states is not None:
            stmt = stmt.where(run_item.c.state.in_([s.value for s in states]))
        return await self._sequence_page(
            stmt, page, position=run_item.c.sequence, build=_ITEM.from_row, key=lambda i: i.sequence
        )

    async def count_by_state(self, run_id: str) -> dict[ItemState, int]:
        rows = await self._all(
            select(run_item.c.state, func.count().label("n"))
            .where(run_item.c.run_id == run_id)
            .group_by(run_item.c.state)
        )
        return {ItemState(r["state"]): int(r["n"]) for r in rows}

    async def create_retry_set(self, run_id: str, source_run_id: str, states: Collection[ItemState]) -> int:
        source = select(literal(run_id, String(ID_LENGTH)), run_item.c.sequence, run_item.c.item_id).where(
            run_item.c.run_id == source_run_id, run_item.c.state.in_([s.value for s in states])
        )
        await self._conn.execute(
            insert(run_retry_item).from_select(["run_id", "sequence", "source_item_id"], source)
        )
        count = await self._conn.scalar(
            select(func.count()).select_from(run_retry_item).where(run_retry_item.c.run_id == run_id)
        )
        return int(count or 0)

    async def list_retry_items(self, run_id: str, page: PageRequest[int]) -> Page[RetryItem, int]:
        return await self._sequence_page(
            select(run_retry_item).where(run_retry_item.c.run_id == run_id),
            page,
            position=run_retry_item.c.sequence,
            build=_RETRY.from_row,
            key=lambda i: i.sequence,
        )

    async def list_retry_recipients(
        self, run_id: str, snapshot_id: str, page: PageRequest[int]
    ) -> Page[Recipient, int]:
        stmt = (
            select(audience_recipient)
            .join(
                run_retry_item,
                and_(
                    run_retry_item.c.run_id == run_id,
                    run_retry_item.c.sequence == audience_recipient.c.sequence,
                ),
            )
            .where(audience_recipient.c.snapshot_id == snapshot_id)
        )
        return await self._sequence_page(
            stmt,
            page,
            position=audience_recipient.c.sequence,
            build=_RECIPIENT.from_row,
            key=lambda r: r.sequence,
        )
