"""Run recovery locks held by the database, so that they hold across Service instances.

On PostgreSQL a recovery lock is a session-level advisory lock on a connection kept for the recovery:
the server releases it when the connection ends, so a recoverer that dies (process killed, network cut)
leaves the run to the next one. SQLite has one Service process per database file, so a lock shared by
every holder in the process is enough there.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import ClassVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from wepush.server.application.execution import InProcessRecoveryLocks
from wepush.server.domain import DatabaseUnavailable

from .engine import is_database_unavailable

__all__ = ["DatabaseRecoveryLocks"]

# Distinct from the migration lock's key space: the first byte of every recovery key is this tag.
_KEY_TAG = 0x52  # "R"


def advisory_key(run_id: str) -> int:
    """A signed 64-bit advisory lock key for ``run_id`` (PostgreSQL's ``bigint``)."""
    digest = hashlib.sha256(run_id.encode("utf-8")).digest()
    return int.from_bytes(bytes([_KEY_TAG]) + digest[:7], "big", signed=True)


class DatabaseRecoveryLocks:
    # SQLite: one registry per database, shared by every holder in this process.
    _held: ClassVar[dict[str, InProcessRecoveryLocks]] = {}

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    def hold(self, run_id: str) -> AbstractAsyncContextManager[bool]:
        if self._engine.dialect.name == "postgresql":
            return self._advisory(run_id)
        return self._in_process(run_id)

    @asynccontextmanager
    async def _advisory(self, run_id: str) -> AsyncIterator[bool]:
        key = advisory_key(run_id)
        async with contextlib.AsyncExitStack() as stack:
            try:
                connection = await stack.enter_async_context(self._engine.connect())
                held = bool(await connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}))
                # Autobegun by the statement: end it, so the connection holds only the lock while the
                # recovery runs its own transactions on others.
                await connection.commit()
            except Exception as error:
                # This connection is not a unit of work's: tell an outage as the units of work do, so the
                # loop recovering runs waits it out quietly rather than logging it as a fault.
                if is_database_unavailable(error, connecting=True):
                    raise DatabaseUnavailable() from error
                raise
            try:
                yield held
            finally:
                if held:
                    # A connection that broke meanwhile took the lock with it; nothing is left to release.
                    with contextlib.suppress(Exception):
                        await connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                        await connection.commit()

    def _in_process(self, run_id: str) -> AbstractAsyncContextManager[bool]:
        url = self._engine.url
        # Every in-memory database is its own: only a file names the same database for two engines.
        where = str(url) if url.database not in (None, "", ":memory:") else f"memory:{id(self._engine)}"
        return self._held.setdefault(where, InProcessRecoveryLocks()).hold(run_id)
