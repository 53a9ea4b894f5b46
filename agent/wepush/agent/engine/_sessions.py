"""ProviderSessionManager: honours the provider's declared thread-safety mode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ._provider import ProviderSession, ThreadSafetyMode
from ._results import ExecutionError

__all__ = ["ProviderSessionManager"]


class ProviderSessionManager:
    """THREAD_SAFE: the run session is shared. SERIALIZED: one call at a time under a lock.
    SESSION_PER_WORKER: each concurrent call gets its own sub-session, reused by later calls, so there are
    never more sub-sessions than the peak number of concurrent calls."""

    def __init__(
        self,
        session: ProviderSession,
        mode: ThreadSafetyMode,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._mode = mode
        self._on_close = on_close
        # The hot path for THREAD_SAFE providers: the session to call, with no lease to take or return.
        self.shared: ProviderSession | None = session if mode is ThreadSafetyMode.THREAD_SAFE else None
        self._lock = asyncio.Lock()
        self._idle: list[ProviderSession] = []
        self._workers: list[ProviderSession] = []
        self._closed = False

    @property
    def worker_sessions(self) -> int:
        return len(self._workers)

    async def acquire(self) -> ProviderSession:
        """The session for one call; hand it back with ``release`` (use ``shared`` when it is set)."""
        if self._mode is ThreadSafetyMode.THREAD_SAFE:
            return self._session
        if self._mode is ThreadSafetyMode.SERIALIZED:
            await self._lock.acquire()
            return self._session
        return self._idle.pop() if self._idle else await self._open_worker()

    def release(self, session: ProviderSession) -> None:
        if self._mode is ThreadSafetyMode.SERIALIZED:
            self._lock.release()
        elif self._mode is ThreadSafetyMode.SESSION_PER_WORKER:
            self._idle.append(session)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[ProviderSession]:
        session = await self.acquire()
        try:
            yield session
        finally:
            self.release(session)

    async def _open_worker(self) -> ProviderSession:
        worker = await self._session.open_worker()
        self._workers.append(worker)
        return worker

    async def close(self) -> list[ExecutionError]:
        """Close sub-sessions, then the run session; every close is attempted and failures collected."""
        if self._closed:
            return []
        self._closed = True
        errors: list[ExecutionError] = []
        for worker in self._workers:
            try:
                await worker.close()
            except Exception as exc:
                errors.append(
                    ExecutionError.from_exception("provider.worker.close", "PROVIDER_CLOSE_FAILED", exc)
                )
        try:
            await self._session.close()
        except Exception as exc:
            errors.append(ExecutionError.from_exception("provider.close", "PROVIDER_CLOSE_FAILED", exc))
        finally:
            if self._on_close is not None:
                self._on_close()
        return errors
