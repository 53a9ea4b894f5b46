"""Staging writes in flight: two at once where writers run side by side, one where the database takes one
writer at a time, every row staged exactly once whatever order the writes end in, and a failed write
ends the upload only once every other write has finished."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Self, cast

import pytest

from wepush.server.application._deps import ImportLimits
from wepush.server.application._import_settings import ImportSettings
from wepush.server.application._import_staging import STAGE_WRITES_IN_FLIGHT, stage_upload
from wepush.server.domain import ImportFormat, StagedRecord, UnitOfWorkFactory

LIMITS = ImportLimits(max_bytes=1 << 20, max_rows=1000, max_columns=4, max_field_length=64)
SETTINGS = ImportSettings(
    format=ImportFormat.CSV, field_mapping={"mobile": "mobile", "name": "name"}, item_id_field="mobile"
)
ROWS = 9
BATCH = 2


class _Staging:
    """The staging repository of the fake: each write yields to the loop a while before it lands, so
    writes started together overlap, and the third write fails when asked to."""

    def __init__(self, *, fail_write: int | None = None) -> None:
        self.rows: list[StagedRecord] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.started = 0
        self.finished = 0
        self._fail_write = fail_write

    async def stage_records(self, records: Sequence[StagedRecord]) -> int:
        self.started += 1
        number = self.started
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            # Later writes land sooner, so rows arrive out of line order.
            for _ in range(50 - 10 * min(number, 4)):
                await asyncio.sleep(0)
            if number == self._fail_write:
                raise ConnectionError("the database went away")
            self.rows.extend(records)
            return len(records)
        finally:
            self.in_flight -= 1
            self.finished += 1


class _Unit:
    def __init__(self, staging: _Staging) -> None:
        self.audience_imports = staging

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class _Factory:
    def __init__(self, staging: _Staging, *, side_by_side: bool) -> None:
        self._staging = staging
        self.writers_side_by_side = side_by_side
        self.concurrent = True

    def __call__(self, *, read_only: bool = False) -> _Unit:
        return _Unit(self._staging)


async def _body() -> AsyncIterator[bytes]:
    yield b"mobile,name\n"
    for n in range(1, ROWS + 1):
        yield f"1380000{n:04d},name {n}\n".encode()


async def _stage(staging: _Staging, *, side_by_side: bool) -> int:
    outcome = await stage_upload(
        _body(),
        uow=cast(UnitOfWorkFactory, _Factory(staging, side_by_side=side_by_side)),
        import_id="import-1",
        settings=SETTINGS,
        limits=LIMITS,
        batch_rows=BATCH,
    )
    return outcome.rows


@pytest.mark.parametrize(("side_by_side", "most"), [(True, STAGE_WRITES_IN_FLIGHT), (False, 1)])
async def test_writes_overlap_only_where_writers_run_side_by_side(side_by_side: bool, most: int) -> None:
    staging = _Staging()
    assert await _stage(staging, side_by_side=side_by_side) == ROWS
    assert staging.most_in_flight == most
    # Every row once, with its own line number, although the writes landed out of order.
    assert sorted(record[1] for record in staging.rows) == list(range(2, ROWS + 2))
    assert [record[2] for record in sorted(staging.rows, key=lambda r: r[1])] == [
        f"1380000{n:04d}" for n in range(1, ROWS + 1)
    ]


async def test_a_failed_write_ends_the_upload_after_every_other_write_finished() -> None:
    staging = _Staging(fail_write=2)
    with pytest.raises(ConnectionError, match="went away"):
        await _stage(staging, side_by_side=True)
    # The write beside the failed one was not left running against a failed import.
    assert staging.in_flight == 0
    assert staging.finished == staging.started
    assert staging.started >= 2
