"""Runtime ports the engine drives. Each docstring is the contract an adapter must honour."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from ._enums import ErrorCategory, ItemState
from ._events import RunEvent
from ._recipients import RecipientRecord
from ._results import ArtifactRef, ItemResult, ProviderResult
from ._secrets import SecretResolver

__all__ = [
    "ArtifactSink",
    "DispatchFence",
    "ExecutionClock",
    "ExecutionObserver",
    "ExecutionPorts",
    "RecipientSource",
    "ResultSink",
    "RunEventSink",
    "SystemClock",
    "TextRedactor",
]


class RecipientSource(Protocol):
    """Streams an audience snapshot in ``sequence`` order.

    ``open`` fails if the snapshot cannot be read. ``next_batch`` returns at most ``max_items`` records
    and an empty sequence at the end. The engine asks for the next batch while the previous one is still
    being dispatched (``EngineOptions.read_low_water``), never for two at once and never while too much
    is outstanding, so a source need not buffer more than one batch. A record may be handed to a provider
    as soon as ``next_batch`` has returned it, unless the ports carry a ``DispatchFence``: then not before
    the fence covers it.
    """

    async def open(self) -> None: ...

    async def next_batch(self, max_items: int) -> Sequence[RecipientRecord]: ...

    async def close(self) -> None: ...


class DispatchFence(Protocol):
    """Makes a record count as possibly sent before any provider sees it: a dispatch high-water mark.

    The engine calls ``covers(sequence)`` right before it starts a record, once per record (its retries are
    covered already); records start in sequence order, though workers side by side may ask about
    neighbouring ones out of order. It is on the hot path: it must answer at once, without I/O or
    blocking, though it may start background work such as covering the records that follow. When it
    answers ``False``, the engine awaits ``cover(sequence)`` and starts the record only once that returns:
    from then on the mark must include ``sequence`` (and ``covers`` must say so). When ``cover`` raises, the
    record is not sent (UNSENT) and the run stops as with a failed source read. Records read ahead but
    not started, and a paused run, ask nothing, so a fence can keep its mark close to what was really
    dispatched.
    """

    def covers(self, sequence: int) -> bool: ...

    async def cover(self, sequence: int) -> None: ...


class ResultSink(Protocol):
    """Durable item results.

    ``open`` proves the sink is writable. ``append`` must be idempotent per (itemId, attempt): the engine
    re-appends a batch after a failure, so a repeat must not create duplicates. ``flush`` makes appended
    results durable.
    """

    async def open(self) -> None: ...

    async def append(self, batch: Sequence[ItemResult]) -> None: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


class ArtifactSink(Protocol):
    """User-facing result files (e.g. success/failed/unknown/unsent JSON Lines), routed by item state.

    ``write`` is called once per final item result, in completion order, and must keep memory constant.
    ``close`` finishes the files and returns what was produced.
    """

    async def open(self) -> None: ...

    async def write(self, item_result: ItemResult) -> None: ...

    async def close(self) -> tuple[ArtifactRef, ...]: ...


class RunEventSink(Protocol):
    """Run events in ``sequence`` order. ``publish`` may be retried with the same events after a failure."""

    async def publish(self, events: Sequence[RunEvent]) -> None: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...


class TextRedactor(Protocol):
    """Masks secrets in free text: the shared shape rules plus whatever exact values the host knows.

    ``text`` must be safe to call from the event loop (no I/O, no blocking) and return text with every
    secret it knows replaced; ``SecretMasker`` is one, and so is the Service's ``Redactor``, which also
    holds the secret values the run resolved.
    """

    def text(self, text: str) -> str: ...


class ExecutionObserver(Protocol):
    """Sees every provider call and every retry of one run, for the host's metrics.

    Called on the event loop in the item's own task: an implementation must not block, await or raise
    (count and return). ``provider_call`` gets the call's result, the item state it would leave if it
    were the last attempt, and the seconds the call took on the execution clock; calls that never reached
    the provider (no session, the run stopping first) are not reported. ``retrying`` is called once per
    retry about to be made, with the category of the failure being retried.
    """

    def provider_call(self, result: ProviderResult, state: ItemState, seconds: float) -> None: ...

    def retrying(self, category: ErrorCategory | None) -> None: ...


class ExecutionClock(Protocol):
    """All engine timing goes through the clock so tests can drive time without real sleeps.

    A clock may also offer ``call_at(when, callback)`` (see ``SystemClock.call_at``): the engine then
    enforces item deadlines with one cancellable timer per call instead of a sleeping task. Clocks without
    it keep working, through ``sleep``.
    """

    def now(self) -> datetime:
        """Current UTC time (timezone-aware)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for intervals and deadlines."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_at(self, when: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        """Run ``callback`` on the running loop once ``monotonic()`` reaches ``when``; cancellable."""
        return asyncio.get_running_loop().call_later(when - time.monotonic(), callback)


@dataclass(frozen=True, slots=True)
class ExecutionPorts:
    recipient_source: RecipientSource
    secret_resolver: SecretResolver
    result_sink: ResultSink
    artifact_sink: ArtifactSink
    event_sink: RunEventSink
    clock: ExecutionClock
    redactor: TextRedactor | None = None
    """Applied to each provider diagnostic and saved response body before it becomes an item result, an
    ITEM_ERROR event or an artifact line. ``None`` keeps the shape rules ``ProviderResult`` applies on
    creation; a host that knows the run's secret values (the embedded agent) passes its redactor, since a
    value such as a password or a webhook token echoed by a vendor has no shape a rule could recognise."""
    observer: ExecutionObserver | None = None
    """Metrics of the run's provider calls and retries; ``None`` (the default) costs the hot path nothing
    but one test per call."""
    dispatch_fence: DispatchFence | None = None
    """Asked before each record is started (see ``DispatchFence``); usually the recipient source itself,
    when its host must know after a crash which recipients may have been sent. ``None`` (the default)
    starts every record as soon as it is read."""
