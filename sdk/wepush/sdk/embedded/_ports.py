"""Per-run port adapters for the embedded engine.

* Shared sinks live as long as the ``WePushEngine``: each run sees a view whose
  ``open``/``close`` do not reach the shared sink, and calls from concurrent
  runs are serialised so a sink written for one caller at a time stays correct.
* Factory-made sinks belong to one run; they are wrapped so closing is
  idempotent, which lets the embedded engine close them after a start
  rejection without double-closing what the engine already closed.
* Recipients given as an iterable or async iterable are streamed in batches.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from wepush.agent.engine import (
    ArtifactRef,
    ArtifactSink,
    ItemResult,
    RecipientRecord,
    RecipientSource,
    ResultSink,
    RunEvent,
    RunEventSink,
)

__all__ = [
    "DiscardArtifactSink",
    "DiscardEventSink",
    "OwnedArtifactSink",
    "OwnedEventSink",
    "OwnedResultSink",
    "Recipients",
    "SharedEventSinkView",
    "SharedResultSinkView",
    "StreamingRecipientSource",
    "as_recipient_source",
]

RecipientLike = RecipientRecord | Mapping[str, Any]
Recipients = RecipientSource | Iterable[RecipientLike] | AsyncIterable[RecipientLike]


class SharedResultSinkView:
    """One run's handle on a shared result sink."""

    def __init__(self, sink: ResultSink, lock: asyncio.Lock) -> None:
        self._sink = sink
        self._lock = lock

    async def open(self) -> None:
        return None

    async def append(self, batch: Sequence[ItemResult]) -> None:
        async with self._lock:
            await self._sink.append(batch)

    async def flush(self) -> None:
        async with self._lock:
            await self._sink.flush()

    async def close(self) -> None:
        # The run is over for this view; the shared sink stays open for other runs.
        await self.flush()


class SharedEventSinkView:
    """One run's handle on a shared event sink (events carry their run id)."""

    def __init__(self, sink: RunEventSink, lock: asyncio.Lock) -> None:
        self._sink = sink
        self._lock = lock

    async def publish(self, events: Sequence[RunEvent]) -> None:
        async with self._lock:
            await self._sink.publish(events)

    async def flush(self) -> None:
        async with self._lock:
            await self._sink.flush()

    async def close(self) -> None:
        await self.flush()


class OwnedResultSink:
    def __init__(self, sink: ResultSink) -> None:
        self._sink = sink
        self.closed = False

    async def open(self) -> None:
        await self._sink.open()

    async def append(self, batch: Sequence[ItemResult]) -> None:
        await self._sink.append(batch)

    async def flush(self) -> None:
        await self._sink.flush()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._sink.close()


class OwnedEventSink:
    def __init__(self, sink: RunEventSink) -> None:
        self._sink = sink
        self.closed = False

    async def publish(self, events: Sequence[RunEvent]) -> None:
        await self._sink.publish(events)

    async def flush(self) -> None:
        await self._sink.flush()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._sink.close()


class OwnedArtifactSink:
    def __init__(self, sink: ArtifactSink) -> None:
        self._sink = sink
        self.closed = False

    async def open(self) -> None:
        await self._sink.open()

    async def write(self, item_result: ItemResult) -> None:
        await self._sink.write(item_result)

    async def close(self) -> tuple[ArtifactRef, ...]:
        if self.closed:
            return ()
        self.closed = True
        return tuple(await self._sink.close())


class DiscardArtifactSink:
    """Used when the application asked for no result files."""

    async def open(self) -> None:
        return None

    async def write(self, item_result: ItemResult) -> None:
        return None

    async def close(self) -> tuple[ArtifactRef, ...]:
        return ()


class DiscardEventSink:
    """Used when the application does not observe run events."""

    async def publish(self, events: Sequence[RunEvent]) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


class StreamingRecipientSource:
    """Reads an iterable or async iterable lazily, one batch per ``next_batch``.

    ``RecipientRecord`` values pass through; a mapping becomes a record whose
    fields are the mapping, ``sequence`` its 1-based position and ``item_id``
    ``"item-<sequence>"``.
    """

    def __init__(self, recipients: Iterable[RecipientLike] | AsyncIterable[RecipientLike]) -> None:
        self._recipients = recipients
        self._sync: Iterator[RecipientLike] | None = None
        self._async: AsyncIterator[RecipientLike] | None = None
        self._sequence = 0
        self._exhausted = False

    async def open(self) -> None:
        if isinstance(self._recipients, AsyncIterable):
            self._async = aiter(self._recipients)
        else:
            self._sync = iter(self._recipients)

    def _record(self, value: RecipientLike) -> RecipientRecord:
        self._sequence += 1
        if isinstance(value, RecipientRecord):
            return value
        if isinstance(value, Mapping):
            return RecipientRecord.of(f"item-{self._sequence}", self._sequence, value)
        raise TypeError(f"a recipient must be a RecipientRecord or a mapping, not {type(value).__name__}")

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        batch: list[RecipientRecord] = []
        while not self._exhausted and len(batch) < max_items:
            try:
                if self._async is not None:
                    value = await anext(self._async)
                elif self._sync is not None:
                    value = next(self._sync)
                else:
                    raise RuntimeError("recipient source is not open")
            except (StopIteration, StopAsyncIteration):
                self._exhausted = True
                break
            batch.append(self._record(value))
        return batch

    async def close(self) -> None:
        # Let a generator run its finally blocks (files, cursors) when a run stops early.
        if self._async is not None and inspect.isasyncgen(self._async):
            await self._async.aclose()
        elif self._sync is not None and inspect.isgenerator(self._sync):
            self._sync.close()


def as_recipient_source(recipients: Recipients) -> RecipientSource:
    if all(callable(getattr(recipients, name, None)) for name in ("open", "next_batch", "close")):
        return recipients  # type: ignore[return-value]
    if isinstance(recipients, Iterable | AsyncIterable):
        return StreamingRecipientSource(recipients)
    raise TypeError("recipients must be a RecipientSource, an iterable or an async iterable")
