"""Count the rows list queries fetch from one table, to prove that a page reads ``limit + 1`` rows at most."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import Select, Table
from sqlalchemy.engine import RowMapping

from wepush.server.infra.db._base import SqlRepository


class RowsRead:
    """One entry per multi-row SELECT from ``table``: how many rows the database returned."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.reads: list[int] = []

    def reset(self) -> None:
        self.reads.clear()


def count_rows_read(monkeypatch: pytest.MonkeyPatch, table: Table) -> RowsRead:
    """Every repository reads multi-row results through ``SqlRepository._all``: wrap it for this test."""
    counter = RowsRead(table)
    original = SqlRepository._all

    async def counting(self: SqlRepository, stmt: Any) -> Sequence[RowMapping]:
        rows = await original(self, stmt)
        if isinstance(stmt, Select) and table in stmt.get_final_froms():
            counter.reads.append(len(rows))
        return rows

    monkeypatch.setattr(SqlRepository, "_all", counting)
    return counter
