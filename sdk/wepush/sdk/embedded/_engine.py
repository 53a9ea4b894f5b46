"""``WePushEngine``: the execution engine assembled for an application that embeds sending.

It creates no database, reads no Service configuration and discovers no
providers: it runs exactly the provider factories the application registered
on the builder.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from wepush.agent.engine import (
    ArtifactSink,
    CancelRun,
    EngineOptions,
    ExecutionClock,
    ExecutionEngine,
    ExecutionPorts,
    ProviderDescriptor,
    ProviderFactory,
    ResultSink,
    RunEventSink,
    RunExecutionSpec,
    RunHandle,
    SecretResolver,
)

from ._ports import (
    DiscardArtifactSink,
    DiscardEventSink,
    OwnedArtifactSink,
    OwnedEventSink,
    OwnedResultSink,
    Recipients,
    SharedEventSinkView,
    SharedResultSinkView,
    as_recipient_source,
)

if TYPE_CHECKING:
    from ._builder import WePushEngineBuilder

__all__ = [
    "ArtifactSinkFactory",
    "EngineConfiguration",
    "EventSinkFactory",
    "ResultSinkFactory",
    "WePushEngine",
]

ResultSinkFactory = Callable[[RunExecutionSpec], ResultSink]
EventSinkFactory = Callable[[RunExecutionSpec], RunEventSink]
ArtifactSinkFactory = Callable[[RunExecutionSpec], ArtifactSink]


@dataclass(frozen=True, slots=True)
class EngineConfiguration:
    """What the builder collected; exactly one of each sink / sink factory pair may be set."""

    providers: Mapping[str, ProviderFactory]
    secret_resolver: SecretResolver
    clock: ExecutionClock
    options: EngineOptions
    result_sink: ResultSink | None = None
    result_sink_factory: ResultSinkFactory | None = None
    event_sink: RunEventSink | None = None
    event_sink_factory: EventSinkFactory | None = None
    artifact_sink_factory: ArtifactSinkFactory | None = None


@dataclass(slots=True)
class _OwnedSinks:
    """Sinks one run owns; closed with the run or after its start was rejected."""

    closers: list[Callable[[], object]] = field(default_factory=list)

    async def close_all(self) -> None:
        for close in self.closers:
            with contextlib.suppress(Exception):
                outcome = close()
                if asyncio.iscoroutine(outcome):
                    await outcome


class WePushEngine:
    """Use as ``async with WePushEngine.builder()...build() as engine``.

    Shared sinks are opened on entry and closed on exit. Leaving the block with
    runs still active cancels them (``CancelRun``) and waits for their summaries,
    so every result is flushed before the shared sinks close.
    """

    def __init__(self, configuration: EngineConfiguration) -> None:
        self._config = configuration
        self._engine = ExecutionEngine(dict(configuration.providers), configuration.options)
        self._result_lock = asyncio.Lock()
        self._event_lock = asyncio.Lock()
        self._runs: dict[str, tuple[RunHandle, asyncio.Task[None]]] = {}
        self._open = False
        self._closed = False

    @staticmethod
    def builder() -> WePushEngineBuilder:
        # Imported here: the builder module imports this one.
        from ._builder import WePushEngineBuilder

        return WePushEngineBuilder()

    def providers(self) -> tuple[ProviderDescriptor, ...]:
        return tuple(factory.descriptor() for _, factory in sorted(self._config.providers.items()))

    @property
    def active_runs(self) -> tuple[RunHandle, ...]:
        return tuple(handle for handle, _ in self._runs.values())

    async def __aenter__(self) -> WePushEngine:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        if self._closed:
            raise RuntimeError("a closed WePushEngine cannot be reopened")
        if self._open:
            return
        if self._config.result_sink is not None:
            await self._config.result_sink.open()
        self._open = True

    async def start(self, spec: RunExecutionSpec, recipients: Recipients) -> RunHandle:
        """Validate and start a run; raises ``EngineValidationError`` if the engine refuses it.

        ``recipients`` is a ``RecipientSource`` or any (async) iterable of
        ``RecipientRecord`` or mappings; it is read in batches, never materialised.
        """
        if not self._open or self._closed:
            raise RuntimeError("WePushEngine is not open: use 'async with engine' first")
        if spec.run_id in self._runs:
            raise ValueError(f"run {spec.run_id!r} is already active in this engine")
        owned = _OwnedSinks()
        try:
            # Inside the try: a sink factory or the recipients may fail after another factory made a
            # sink, and that sink belongs to this (rejected) run, so it is closed like any other.
            ports = self._ports(spec, recipients, owned)
            handle = await self._engine.start(spec, ports)
        except BaseException:
            await owned.close_all()
            raise
        watcher = asyncio.create_task(self._watch(handle, owned), name=f"wepush-run-{spec.run_id}")
        self._runs[spec.run_id] = (handle, watcher)
        return handle

    def _ports(self, spec: RunExecutionSpec, recipients: Recipients, owned: _OwnedSinks) -> ExecutionPorts:
        config = self._config
        result_sink: ResultSink
        if config.result_sink_factory is not None:
            owned_results = OwnedResultSink(config.result_sink_factory(spec))
            owned.closers.append(owned_results.close)
            result_sink = owned_results
        else:
            assert config.result_sink is not None
            result_sink = SharedResultSinkView(config.result_sink, self._result_lock)
        event_sink: RunEventSink
        if config.event_sink_factory is not None:
            owned_events = OwnedEventSink(config.event_sink_factory(spec))
            owned.closers.append(owned_events.close)
            event_sink = owned_events
        elif config.event_sink is not None:
            event_sink = SharedEventSinkView(config.event_sink, self._event_lock)
        else:
            event_sink = DiscardEventSink()
        artifact_sink: ArtifactSink = DiscardArtifactSink()
        if config.artifact_sink_factory is not None:
            owned_artifacts = OwnedArtifactSink(config.artifact_sink_factory(spec))
            owned.closers.append(owned_artifacts.close)
            artifact_sink = owned_artifacts
        return ExecutionPorts(
            recipient_source=as_recipient_source(recipients),
            secret_resolver=config.secret_resolver,
            result_sink=result_sink,
            artifact_sink=artifact_sink,
            event_sink=event_sink,
            clock=config.clock,
        )

    async def _watch(self, handle: RunHandle, owned: _OwnedSinks) -> None:
        try:
            await handle.completion()
        except Exception:  # noqa: S110 - the caller sees the failure through its own completion()
            pass
        finally:
            # The engine closes run sinks itself; this only catches a run that died before doing so.
            await owned.close_all()
            self._runs.pop(handle.run_id, None)

    async def close(self) -> None:
        """Cancel active runs, wait for them, then close the shared sinks; idempotent."""
        if self._closed:
            return
        self._closed = True
        for handle, _ in list(self._runs.values()):
            await handle.submit(CancelRun("wepush-engine-close", "the embedding engine is closing"))
        watchers = [watcher for _, watcher in self._runs.values()]
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)
        if self._open:
            await _close_shared(self._config.result_sink, self._config.event_sink)


async def _close_shared(*sinks: ResultSink | RunEventSink | None) -> None:
    """Flush and close each shared sink; one failing never keeps the next open."""
    failures: list[Exception] = []
    for sink in sinks:
        if sink is None:
            continue
        try:
            await sink.flush()
            await sink.close()
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]
