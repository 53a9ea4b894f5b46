"""ResultBatcher: appends item results to the ResultSink in batches and feeds the ArtifactSink."""

from __future__ import annotations

import asyncio
from collections import deque

from ._options import EngineOptions
from ._ports import ArtifactSink, ExecutionClock, ResultSink
from ._results import ExecutionError, ItemResult

__all__ = ["ResultBatcher"]


class ResultBatcher:
    """Owns the result backlog.

    A background task appends full batches (and partial ones on ``tick``). A failed append is retried
    with the same batch, which the sink deduplicates by (itemId, attempt). When the sink keeps failing,
    the batcher gives up, reports through ``failure`` and discards further results so memory stays
    bounded; the run then stops dispatching. Artifact writes follow a successful append; an artifact sink
    that keeps failing is disabled without stopping the run.
    """

    def __init__(
        self,
        result_sink: ResultSink,
        artifact_sink: ArtifactSink,
        clock: ExecutionClock,
        options: EngineOptions,
    ) -> None:
        self._results = result_sink
        self._artifacts: ArtifactSink | None = artifact_sink
        self._clock = clock
        self._options = options
        self._batch_size = options.result_batch_size
        self._high_water = options.result_high_water
        self._buffer: deque[ItemResult] = deque()
        self._batch: list[ItemResult] = []
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._flush_partial = False
        self._closing = False
        self.failure: ExecutionError | None = None
        self.errors: list[ExecutionError] = []
        self.appended = 0

    @property
    def backlog(self) -> int:
        return len(self._buffer) + len(self._batch)

    def add(self, result: ItemResult) -> None:
        if self.failure is not None:
            return
        buffer = self._buffer
        buffer.append(result)
        size = len(buffer)
        if size >= self._batch_size:
            self._wake.set()
        if size + len(self._batch) >= self._high_water:
            self._space.clear()

    def tick(self) -> None:
        """Flush a partial batch soon, so results never wait longer than one interval."""
        if self._buffer:
            self._flush_partial = True
            self._wake.set()

    def has_capacity(self) -> bool:
        return len(self._buffer) + len(self._batch) < self._high_water

    async def wait_capacity(self) -> None:
        while not self.has_capacity():
            self._space.clear()
            self._wake.set()
            await self._space.wait()

    async def run(self) -> None:
        """Background flusher; ends after ``close`` once its current batch is written."""
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            await self._flush(final=False)

    def close(self) -> None:
        """Ask the background flusher to stop; it never abandons a batch half-appended."""
        self._closing = True
        self._wake.set()

    async def drain(self) -> None:
        """Append everything still buffered, then flush the result sink."""
        await self._flush(final=True)
        if self.failure is None:
            error = await self._retrying("flush", "RESULT_SINK_FLUSH_FAILED", None)
            if error is not None:
                self.errors.append(error)

    async def _flush(self, *, final: bool) -> None:
        size = self._options.result_batch_size
        while self.failure is None and (
            self._batch or len(self._buffer) >= size or (self._buffer and (final or self._flush_partial))
        ):
            if not self._batch:
                count = min(size, len(self._buffer))
                self._batch = [self._buffer.popleft() for _ in range(count)]
            error = await self._retrying("append", "RESULT_SINK_FAILED", self._batch)
            if error is not None:
                self._fail(error)
                break
            batch, self._batch = self._batch, []
            self.appended += len(batch)
            await self._write_artifacts(batch)
            if self.has_capacity():
                self._space.set()
        self._flush_partial = False

    async def _write_artifacts(self, batch: list[ItemResult]) -> None:
        for item in batch:
            sink = self._artifacts
            if sink is None:
                return
            failures = 0
            while True:
                try:
                    await sink.write(item)
                    break
                except Exception as exc:
                    failures += 1
                    if failures >= self._options.sink_retry_attempts:
                        self.errors.append(
                            ExecutionError.from_exception("artifacts", "ARTIFACT_SINK_FAILED", exc)
                        )
                        self._artifacts = None
                        return
                    await self._clock.sleep(self._options.sink_retry_delay(failures))

    async def _retrying(self, op: str, code: str, batch: list[ItemResult] | None) -> ExecutionError | None:
        failures = 0
        while True:
            try:
                if batch is None:
                    await self._results.flush()
                else:
                    await self._results.append(tuple(batch))
                return None
            except Exception as exc:
                failures += 1
                if failures >= self._options.sink_retry_attempts:
                    return ExecutionError.from_exception(f"results.{op}", code, exc)
                await self._clock.sleep(self._options.sink_retry_delay(failures))

    def _fail(self, error: ExecutionError) -> None:
        self.failure = error
        self.errors.append(error)
        self._buffer.clear()
        self._batch = []
        self._space.set()
