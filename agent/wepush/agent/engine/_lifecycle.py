"""RunShutdown: owns the run's sinks and background publishers and closes everything in the seed's order.

Order: stop reading and settle in-flight items (the coordinator), flush results, flush events, close the
provider session, close the recipient source. A failing step never prevents the next one; its error is
kept for ``RunSummary.suppressed_errors``.
"""

from __future__ import annotations

import asyncio

from ._batcher import ResultBatcher
from ._dispatcher import EventDispatcher
from ._options import EngineOptions
from ._ports import ExecutionClock, ExecutionPorts
from ._results import ArtifactRef, ExecutionError
from ._sessions import ProviderSessionManager

__all__ = ["RunShutdown"]


class RunShutdown:
    def __init__(
        self, run_id: str, ports: ExecutionPorts, clock: ExecutionClock, options: EngineOptions
    ) -> None:
        self._ports = ports
        self.batcher = ResultBatcher(ports.result_sink, ports.artifact_sink, clock, options)
        self.events = EventDispatcher(run_id, ports.event_sink, clock, options)
        self.errors: list[ExecutionError] = []
        self._batcher_task: asyncio.Task[None] | None = None
        self._events_task: asyncio.Task[None] | None = None

    def start_background(self) -> None:
        self._batcher_task = asyncio.create_task(self.batcher.run(), name="result-batcher")
        self._events_task = asyncio.create_task(self.events.run(), name="event-dispatcher")

    async def finish_results(self) -> None:
        self.batcher.close()
        if self._batcher_task is not None:
            await asyncio.gather(self._batcher_task, return_exceptions=True)
        await self.batcher.drain()
        self.errors.extend(self.batcher.errors)

    async def close_sinks(self) -> tuple[ArtifactRef, ...]:
        artifacts: tuple[ArtifactRef, ...] = ()
        try:
            artifacts = tuple(await self._ports.artifact_sink.close())
        except Exception as exc:
            self.errors.append(
                ExecutionError.from_exception("artifacts.close", "ARTIFACT_SINK_CLOSE_FAILED", exc)
            )
        try:
            await self._ports.result_sink.close()
        except Exception as exc:
            self.errors.append(
                ExecutionError.from_exception("results.close", "RESULT_SINK_CLOSE_FAILED", exc)
            )
        return artifacts

    async def finish_events(self) -> None:
        await _stop(self._events_task)
        self.errors.extend(await self.events.drain())

    async def close_provider(self, sessions: ProviderSessionManager) -> None:
        self.errors.extend(await sessions.close())

    async def close_source(self) -> None:
        try:
            await self._ports.recipient_source.close()
        except Exception as exc:
            self.errors.append(ExecutionError.from_exception("recipients.close", "SOURCE_CLOSE_FAILED", exc))

    async def close_event_sink(self) -> None:
        try:
            await self._ports.event_sink.close()
        except Exception as exc:
            self.errors.append(ExecutionError.from_exception("events.close", "EVENT_SINK_CLOSE_FAILED", exc))


async def _stop(task: asyncio.Task[None] | None) -> None:
    # Safe for the event publisher: a batch cut off mid-publish is re-sent with the same sequences.
    if task is None or task.done():
        return
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
