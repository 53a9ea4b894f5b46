"""Shared repository machinery: optimistic updates, keyset pages, constraint-violation mapping."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from sqlalchemy import ColumnElement, Select, Table, and_, exists, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from wepush.server.domain import Clock, Keyset, NotFound, Page, PageRequest, VersionConflict

T = TypeVar("T")

_UNIQUE_VIOLATION = "23505"

#: ``share``: the caller is about to store a reference to the row, which must not be deleted or changed
#: before it commits; ``update``: the caller is about to change or delete the row.
RowLock = Literal["share", "update"]


def is_unique_violation(error: IntegrityError) -> bool:
    """True for a UNIQUE / PRIMARY KEY violation on either database (not for FK or NOT NULL)."""
    original = error.orig
    code = getattr(original, "pgcode", None) or getattr(original, "sqlstate", None)
    if code is not None:
        return str(code) == _UNIQUE_VIOLATION
    message = str(original)
    return "UNIQUE constraint failed" in message or "PRIMARY KEY constraint failed" in message


class SqlRepository:
    """Base of every repository: the unit of work's connection and clock."""

    def __init__(self, connection: AsyncConnection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    @property
    def _dialect(self) -> str:
        return self._conn.dialect.name

    @property
    def _is_postgresql(self) -> bool:
        return self._dialect == "postgresql"

    async def _one(self, stmt: Any) -> RowMapping | None:
        return (await self._conn.execute(stmt)).mappings().one_or_none()

    async def _all(self, stmt: Any) -> Sequence[RowMapping]:
        return (await self._conn.execute(stmt)).mappings().all()

    async def _exists(self, *criteria: ColumnElement[bool]) -> bool:
        return bool(await self._conn.scalar(select(exists().where(*criteria))))

    async def _get_row(
        self,
        table: Table,
        resource_type: str,
        resource_id: str,
        *criteria: ColumnElement[bool],
        lock: RowLock | None = None,
    ) -> RowMapping:
        """The row, or :class:`NotFound`. ``lock`` holds it until the transaction ends on PostgreSQL
        (``FOR SHARE`` / ``FOR UPDATE``); SQLite needs none, its writers already run one at a time."""
        stmt = select(table).where(table.c.id == resource_id, *criteria)
        if lock is not None:
            stmt = stmt.with_for_update(read=lock == "share")
        row = await self._one(stmt)
        if row is None:
            raise NotFound(resource_type, resource_id)
        return row

    async def _insert(
        self, table: Table, values: dict[str, Any], on_duplicate: Callable[[], Exception]
    ) -> None:
        try:
            await self._conn.execute(table.insert().values(**values))
        except IntegrityError as error:
            if is_unique_violation(error):
                raise on_duplicate() from error
            raise

    async def _update_versioned(
        self,
        table: Table,
        resource_type: str,
        resource_id: str,
        expected_version: int,
        values: dict[str, Any],
        *scope: ColumnElement[bool],
        require: Sequence[ColumnElement[bool]] = (),
        on_duplicate: Callable[[], Exception] | None = None,
    ) -> RowMapping:
        """``UPDATE … SET …, version = version + 1 WHERE id = ? AND version = ? [AND scope AND require]``.

        ``scope`` decides visibility (workspace, not soft-deleted); ``require`` is a precondition such as an
        expected state. Zero rows means the row is not visible (:class:`NotFound`) or someone else changed
        it first (:class:`VersionConflict`); the follow-up read only chooses which error to raise.
        """
        values = {k: v for k, v in values.items() if k not in ("id", "version", "created_at")}
        values["updated_at"] = self._clock()
        stmt = (
            update(table)
            .where(table.c.id == resource_id, table.c.version == expected_version, *scope, *require)
            .values(**values, version=table.c.version + 1)
            .returning(*table.c)
        )
        try:
            row = await self._one(stmt)
        except IntegrityError as error:
            if on_duplicate is not None and is_unique_violation(error):
                raise on_duplicate() from error
            raise
        if row is None:
            current = await self._conn.scalar(
                select(table.c.version).where(table.c.id == resource_id, *scope)
            )
            if current is None:
                raise NotFound(resource_type, resource_id)
            # Named when it differs: a request based on a version never reached is no "no longer".
            raise VersionConflict(
                resource_type,
                resource_id,
                expected_version,
                current=int(current) if current != expected_version else None,
            )
        return row

    async def _keyset_page(
        self,
        stmt: Select[Any],
        page: PageRequest[Keyset],
        *,
        at: Any,
        id_: Any,
        build: Callable[[RowMapping], T],
        key: Callable[[T], Keyset],
        descending: bool = True,
    ) -> Page[T, Keyset]:
        """Read ``limit + 1`` rows ordered by ``(at, id)`` after the decoded position.

        ``stmt`` carries every filter of the listing (see ``_text_match.contains_folded`` for names), so
        the extra row proves ``has_more`` and nothing is skipped after the read: a page is full unless it
        is the last one.
        """
        if page.after is not None:
            a, i = page.after.at, page.after.id
            if descending:
                stmt = stmt.where(or_(at < a, and_(at == a, id_ < i)))
            else:
                stmt = stmt.where(or_(at > a, and_(at == a, id_ > i)))
        order = (at.desc(), id_.desc()) if descending else (at.asc(), id_.asc())
        rows = await self._all(stmt.order_by(*order).limit(page.limit + 1))
        items = [build(row) for row in rows[: page.limit]]
        more = len(rows) > page.limit
        return Page(items, key(items[-1]) if more else None)

    async def _sequence_page(
        self,
        stmt: Select[Any],
        page: PageRequest[int],
        *,
        position: Any,
        build: Callable[[RowMapping], T],
        key: Callable[[T], int],
        descending: bool = False,
    ) -> Page[T, int]:
        """Read ``limit + 1`` rows ordered by a unique integer position after ``page.after``."""
        if page.after is not None:
            stmt = stmt.where(position < page.after if descending else position > page.after)
        rows = await self._all(
            stmt.order_by(position.desc() if descending else position.asc()).limit(page.limit + 1)
        )
        items = [build(row) for row in rows[: page.limit]]
        more = len(rows) > page.limit
        return Page(items, key(items[-1]) if more else None)
