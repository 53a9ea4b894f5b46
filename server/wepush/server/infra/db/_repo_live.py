"""The one implementation of get, list, add, update and delete for the named workspace resources.

Accounts, messages, audiences and jobs share their storage rules: a name unique among the live rows of a
workspace, optimistic versions, newest-first pages, and a soft delete that is refused while anything
still references the row. Each repository names its table, its kind and its row mapper, and says what references its rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from sqlalchemy import ColumnElement, Table

from wepush.server.domain import Keyset, NameAlreadyUsed, Page, PageRequest, ResourceInUse, ResourceReferences

from ._base import RowLock, SqlRepository
from ._mapping import RowMapper
from ._text_match import contains_folded

__all__ = ["LiveResources"]


class _Named(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def workspace_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def created_at(self) -> datetime: ...


E = TypeVar("E", bound=_Named)


class LiveResources(SqlRepository, ABC, Generic[E]):
    """Rows of ``table`` not deleted; ``kind`` names them in errors ("account", "job" …)."""

    table: Table
    kind: str
    mapper: RowMapper[E]

    def _duplicate_name(self, entity: E) -> Callable[[], Exception]:
        return lambda: NameAlreadyUsed(self.kind, entity.name)

    async def _add_row(self, entity: E) -> E:
        await self._insert(self.table, self.mapper.to_values(entity), self._duplicate_name(entity))
        return entity

    async def get(self, workspace_id: str, resource_id: str, *, referencing: bool = False) -> E:
        return await self._live(workspace_id, resource_id, lock="share" if referencing else None)

    async def _live(self, workspace_id: str, resource_id: str, *, lock: RowLock | None) -> E:
        table = self.table
        row = await self._get_row(
            table,
            self.kind,
            resource_id,
            table.c.workspace_id == workspace_id,
            table.c.deleted_at.is_(None),
            lock=lock,
        )
        return self.mapper.from_row(row)

    async def list_page(
        self, workspace_id: str, page: PageRequest[Keyset], *, name: str | None = None
    ) -> Page[E, Keyset]:
        return await self._live_page(workspace_id, page, name=name)

    async def _live_page(
        self, workspace_id: str, page: PageRequest[Keyset], *criteria: ColumnElement[bool], name: str | None
    ) -> Page[E, Keyset]:
        """Live rows matching ``criteria``, newest first; a non-empty ``name`` keeps the rows whose name
        contains it, ignoring case. The filters are SQL, so a page reads ``limit + 1`` rows whatever they
        skip."""
        table = self.table
        stmt = table.select().where(
            table.c.workspace_id == workspace_id, table.c.deleted_at.is_(None), *criteria
        )
        if name:
            stmt = stmt.where(contains_folded(table.c.name, name))
        return await self._keyset_page(
            stmt,
            page,
            at=table.c.created_at,
            id_=table.c.id,
            build=self.mapper.from_row,
            key=lambda entity: Keyset(entity.created_at, entity.id),
        )

    async def update(self, entity: E) -> E:
        table = self.table
        row = await self._update_versioned(
            table,
            self.kind,
            entity.id,
            entity.version,
            self.mapper.to_values(entity),
            table.c.workspace_id == entity.workspace_id,
            table.c.deleted_at.is_(None),
            on_duplicate=self._duplicate_name(entity),
        )
        return self.mapper.from_row(row)

    @abstractmethod
    async def references(self, workspace_id: str, resource_id: str) -> ResourceReferences:
        """What still uses the resource (jobs, runs, schedules …): a delete is refused while any does."""

    async def delete(self, workspace_id: str, resource_id: str, expected_version: int) -> None:
        """Refused with :class:`ResourceInUse` while referenced; otherwise marks ``deleted_at``.

        The row is locked before the references are counted: a transaction that is storing a reference
        holds the row ``FOR SHARE`` (``get(..., referencing=True)``), so on PostgreSQL the delete waits
        for it to commit and then counts its reference, instead of counting before it and deleting what
        a new job or run points at.
        """
        await self._live(workspace_id, resource_id, lock="update")
        found = await self.references(workspace_id, resource_id)
        if found.any:
            raise ResourceInUse(self.kind, resource_id, found)
        table = self.table
        await self._update_versioned(
            table,
            self.kind,
            resource_id,
            expected_version,
            {"deleted_at": self._clock()},
            table.c.workspace_id == workspace_id,
            table.c.deleted_at.is_(None),
        )
