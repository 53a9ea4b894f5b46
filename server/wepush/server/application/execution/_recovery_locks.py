"""Who recovers a run: one recoverer at a time, across every Service instance.

Recovery takes several transactions (settle the items, rebuild the artifacts and the log, end the run).
Two instances recovering the same run at once (one restarting while another's reaper has just started)
would each supersede the artifacts the other is writing and race to end the run. A recoverer therefore
holds the run's recovery lock for the whole of it; whoever cannot get it leaves the run to the holder.
The lock must end with its holder's process, so that a recoverer that dies leaves the run to the next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

__all__ = ["InProcessRecoveryLocks", "RecoveryLocks"]


class RecoveryLocks(Protocol):
    def hold(self, run_id: str) -> AbstractAsyncContextManager[bool]:
        """Try to take the run's recovery lock for the ``async with`` block; the block gets ``True`` if
        this caller holds it, ``False`` if another recoverer does (never waits for it)."""
        ...


class InProcessRecoveryLocks:
    """Recovery locks for one process: enough where one process owns the database (standalone SQLite)."""

    def __init__(self) -> None:
        self._held: set[str] = set()

    @asynccontextmanager
    async def hold(self, run_id: str) -> AsyncIterator[bool]:
        if run_id in self._held:
            yield False
            return
        self._held.add(run_id)
        try:
            yield True
        finally:
            self._held.discard(run_id)
