"""In-memory port implementations for tests and embedded use; each can be scripted to fail."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from ._enums import ItemState, RunEventType
from ._events import RunEvent
from ._recipients import RecipientRecord
from ._results import ArtifactRef, ItemResult

__all__ = [
    "InMemoryArtifactSink",
    "InMemoryEventSink",
    "InMemoryRecipientSource",
    "InMemoryResultSink",
    "ScriptedFailure",
]


class ScriptedFailure(RuntimeError):
    """Raised by an in-memory port when a test scripted it to fail."""


class _FailureScript:
    """Fails the next ``n`` calls of one operation."""

    def __init__(self) -> None:
        self.remaining = 0
        self.raised = 0

    def arm(self, times: int) -> None:
        self.remaining = times

    def check(self, operation: str) -> None:
        if self.remaining > 0:
            self.remaining -= 1
            self.raised += 1
            raise ScriptedFailure(f"scripted {operation} failure")


class InMemoryRecipientSource:
    """Generates ``count`` recipients lazily (or streams ``records``): nothing is materialised up front.

    ``settled`` reports how many items have a recorded result; with it the source tracks
    ``max_outstanding``, the most records it had handed out without a result at any read.
    """

    def __init__(
        self,
        count: int = 0,
        *,
        records: Iterable[RecipientRecord] | None = None,
        fields: Callable[[int], Mapping[str, Any]] | None = None,
        item_id: Callable[[int], str] | None = None,
        settled: Callable[[], int] | None = None,
        open_error: Exception | None = None,
        close_error: Exception | None = None,
        fail_after: int | None = None,
    ) -> None:
        self._iterator: Iterator[RecipientRecord] = (
            iter(records) if records is not None else self._generate(count, fields, item_id)
        )
        self._settled = settled
        self._open_error = open_error
        self._close_error = close_error
        self._fail_after = fail_after
        self.emitted = 0
        self.reads = 0
        self.max_batch = 0
        self.max_outstanding = 0
        self.opened = False
        self.closed = False

    @staticmethod
    def _generate(
        count: int,
        fields: Callable[[int], Mapping[str, Any]] | None,
        item_id: Callable[[int], str] | None,
    ) -> Iterator[RecipientRecord]:
        for sequence in range(1, count + 1):
            name = item_id(sequence) if item_id else f"item-{sequence:07d}"
            values = fields(sequence) if fields else {"address": f"user{sequence}@example.test"}
            yield RecipientRecord.of(name, sequence, values)

    async def open(self) -> None:
        if self._open_error is not None:
            raise self._open_error
        self.opened = True

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]:
        if self._fail_after is not None and self.emitted >= self._fail_after:
            raise ScriptedFailure("scripted read failure")
        batch: list[RecipientRecord] = []
        for record in self._iterator:
            batch.append(record)
            if len(batch) >= max_items:
                break
        self.reads += 1
        self.emitted += len(batch)
        self.max_batch = max(self.max_batch, len(batch))
        if self._settled is not None:
            self.max_outstanding = max(self.max_outstanding, self.emitted - self._settled())
        return batch

    async def close(self) -> None:
        self.closed = True
        if self._close_error is not None:
            raise self._close_error


class InMemoryResultSink:
    """Keeps results keyed by (itemId, attempt); a repeated key is ignored, which makes re-appends safe.

    ``fail_appends(n)`` makes the next ``n`` appends fail; with ``partial=True`` a failing append first
    stores half of its batch, as a real store might before losing its connection.
    """

    def __init__(self, *, open_error: Exception | None = None, close_error: Exception | None = None) -> None:
        self.results: dict[tuple[str, int], ItemResult] = {}
        self.item_ids: Counter[str] = Counter()
        self.append_calls = 0
        self.duplicates_ignored = 0
        self.max_batch = 0
        self.flushes = 0
        self.opened = False
        self.closed = False
        self._open_error = open_error
        self._close_error = close_error
        self._append_failures = _FailureScript()
        self._flush_failures = _FailureScript()
        self._partial = False

    def fail_appends(self, times: int, *, partial: bool = False) -> None:
        self._append_failures.arm(times)
        self._partial = partial

    def fail_flushes(self, times: int) -> None:
        self._flush_failures.arm(times)

    @property
    def append_failures(self) -> int:
        return self._append_failures.raised

    @property
    def count(self) -> int:
        return len(self.results)

    def states(self) -> Counter[ItemState]:
        return Counter(result.state for result in self.results.values())

    async def open(self) -> None:
        if self._open_error is not None:
            raise self._open_error
        self.opened = True

    async def append(self, batch: Sequence[ItemResult]) -> None:
        self.append_calls += 1
        self.max_batch = max(self.max_batch, len(batch))
        if self._append_failures.remaining > 0:
            if self._partial:
                self._store(batch[: len(batch) // 2])
            self._append_failures.check("append")
        self._store(batch)

    def _store(self, batch: Sequence[ItemResult]) -> None:
        for result in batch:
            if result.key in self.results:
                self.duplicates_ignored += 1
                continue
            self.results[result.key] = result
            self.item_ids[result.item_id] += 1

    async def flush(self) -> None:
        self._flush_failures.check("flush")
        self.flushes += 1

    async def close(self) -> None:
        self.closed = True
        if self._close_error is not None:
            raise self._close_error


class InMemoryEventSink:
    """Stores events by sequence, so a re-published batch does not duplicate them."""

    def __init__(self, *, close_error: Exception | None = None) -> None:
        self.by_sequence: dict[int, RunEvent] = {}
        self.publish_calls = 0
        self.flushes = 0
        self.closed = False
        self._close_error = close_error
        self._publish_failures = _FailureScript()
        self._flush_failures = _FailureScript()

    def fail_publishes(self, times: int) -> None:
        self._publish_failures.arm(times)

    def fail_flushes(self, times: int) -> None:
        self._flush_failures.arm(times)

    @property
    def publish_failures(self) -> int:
        return self._publish_failures.raised

    @property
    def events(self) -> list[RunEvent]:
        return [self.by_sequence[key] for key in sorted(self.by_sequence)]

    def of_type(self, event_type: RunEventType) -> list[RunEvent]:
        return [event for event in self.events if event.type is event_type]

    def types(self) -> list[RunEventType]:
        return [event.type for event in self.events]

    async def publish(self, events: Sequence[RunEvent]) -> None:
        self.publish_calls += 1
        self._publish_failures.check("publish")
        for event in events:
            self.by_sequence[event.sequence] = event

    async def flush(self) -> None:
        self._flush_failures.check("flush")
        self.flushes += 1

    async def close(self) -> None:
        self.closed = True
        if self._close_error is not None:
            raise self._close_error


class InMemoryArtifactSink:
    """Counts results per outcome file without keeping them (constant memory)."""

    _FILES: ClassVar[Mapping[ItemState, str]] = {
        ItemState.SUCCEEDED: "success.jsonl",
        ItemState.FAILED: "failed.jsonl",
        ItemState.UNKNOWN: "unknown.jsonl",
        ItemState.UNSENT: "unsent.jsonl",
        ItemState.SKIPPED: "skipped.jsonl",
    }

    def __init__(self, *, open_error: Exception | None = None, close_error: Exception | None = None) -> None:
        self.records: Counter[str] = Counter()
        self.sizes: Counter[str] = Counter()
        self.opened = False
        self.closed = False
        self._open_error = open_error
        self._close_error = close_error
        self._write_failures = _FailureScript()

    def fail_writes(self, times: int) -> None:
        self._write_failures.arm(times)

    async def open(self) -> None:
        if self._open_error is not None:
            raise self._open_error
        self.opened = True

    async def write(self, item_result: ItemResult) -> None:
        self._write_failures.check("write")
        name = self._FILES[item_result.state]
        self.records[name] += 1
        self.sizes[name] += len(item_result.to_json_line().encode("utf-8")) + 1

    async def close(self) -> tuple[ArtifactRef, ...]:
        self.closed = True
        if self._close_error is not None:
            raise self._close_error
        return tuple(
            ArtifactRef(
                name, name.removesuffix(".jsonl"), f"memory://{name}", "application/x-ndjson", size, count
            )
            for name, count in sorted(self.records.items())
            for size in (self.sizes[name],)
        )
