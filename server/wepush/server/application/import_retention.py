"""Import retention: staging data is temporary (the seed keeps temporary data 24 hours).

An open import past its deadline becomes EXPIRED, and the staging rows of every import past its
deadline (expired, failed or committed alike: the snapshot holds the committed recipients) are deleted a
bounded number of rows per transaction, so a million-row import never holds the database's write lock
for long. A pass can be repeated any number of times; an interrupted one is finished by the next.

Nothing reads staged rows once the deadline has passed, but the rows themselves go a grace period
later: an error-rows download begun just before the deadline can still finish, and an instance whose
clock runs a little ahead does not delete rows another instance is still reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from wepush.server.application.background import PassFailures, repeat_every
from wepush.server.domain import UnitOfWorkFactory

__all__ = ["STAGING_GRACE", "ImportRetention", "ImportSweepReport", "discard_staging_in_batches"]

_log = logging.getLogger("wepush.server.imports")
#: Staging rows deleted per transaction.
DISCARD_BATCH_ROWS: Final = 20_000
#: Imports handled per query.
_IMPORT_BATCH: Final = 100
#: How long past its deadline an import's staged rows are kept (see the module text).
STAGING_GRACE: Final = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ImportSweepReport:
    expired_imports: int = 0
    """Open imports marked EXPIRED by this pass."""
    discarded_imports: int = 0
    """Imports whose staging rows this pass deleted (all of them)."""
    discarded_rows: int = 0


class ImportRetention:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        clock: Callable[[], datetime],
        *,
        batch_rows: int = DISCARD_BATCH_ROWS,
        grace: timedelta = STAGING_GRACE,
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._batch_rows = batch_rows
        self._grace = grace

    async def sweep(self) -> ImportSweepReport:
        now = self._clock()
        expired = 0
        while True:
            async with self._uow() as uow:
                changed = await uow.audience_imports.expire_open(now, _IMPORT_BATCH)
            expired += changed
            if changed < _IMPORT_BATCH:
                break
        imports = rows = 0
        while True:
            async with self._uow(read_only=True) as uow:
                due = await uow.audience_imports.with_expired_staging(now - self._grace, _IMPORT_BATCH)
            for import_id in due:
                rows += await self._discard(import_id)
                imports += 1
            if len(due) < _IMPORT_BATCH:
                break
        return ImportSweepReport(expired, imports, rows)

    async def _discard(self, import_id: str) -> int:
        return await discard_staging_in_batches(self._uow, import_id, self._batch_rows)

    async def run_every(self, interval: timedelta) -> None:
        """Sweep now and then every ``interval`` until cancelled; a failed pass is retried next time."""
        failures = PassFailures(_log, "import retention", event="IMPORT_RETENTION_FAILED")
        await repeat_every(interval, self._pass, failures)

    async def _pass(self) -> None:
        report = await self.sweep()
        if report.expired_imports or report.discarded_rows:
            _log.info("import retention: %s", report, extra={"event": "IMPORT_RETENTION_PASS"})


async def discard_staging_in_batches(
    uow_factory: UnitOfWorkFactory, import_id: str, batch_rows: int = DISCARD_BATCH_ROWS
) -> int:
    """Delete an import's staging rows ``batch_rows`` per transaction; how many there were."""
    total = 0
    while True:
        async with uow_factory() as uow:
            deleted = await uow.audience_imports.discard_staging_rows(import_id, batch_rows)
        total += deleted
        if deleted < batch_rows:
            return total
        # Let other writers in between two batches of a large import.
        await asyncio.sleep(0)
