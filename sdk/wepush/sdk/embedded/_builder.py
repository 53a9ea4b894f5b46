"""A fluent builder for :class:`WePushEngine`, mirroring the seed's Java builder."""

from __future__ import annotations

from typing import Self

from wepush.agent.engine import (
    EngineOptions,
    ExecutionClock,
    MappingSecretResolver,
    ProviderFactory,
    ResultSink,
    RunEventSink,
    SecretResolver,
    SystemClock,
)

from ._engine import (
    ArtifactSinkFactory,
    EngineConfiguration,
    EventSinkFactory,
    ResultSinkFactory,
    WePushEngine,
)

__all__ = ["WePushEngineBuilder"]


class WePushEngineBuilder:
    """Collects providers, ports and options; ``build()`` checks they fit together.

    Only the providers passed to :meth:`provider` are available: nothing is
    discovered from installed packages. Without a secret resolver, every secret
    lookup fails; without an event sink, events are dropped; without an
    artifact sink factory, no result files are written.
    """

    def __init__(self) -> None:
        self._providers: list[ProviderFactory] = []
        self._secret_resolver: SecretResolver | None = None
        self._result_sink: ResultSink | None = None
        self._result_sink_factory: ResultSinkFactory | None = None
        self._event_sink: RunEventSink | None = None
        self._event_sink_factory: EventSinkFactory | None = None
        self._artifact_sink_factory: ArtifactSinkFactory | None = None
        self._clock: ExecutionClock | None = None
        self._options: EngineOptions | None = None

    def provider(self, factory: ProviderFactory) -> Self:
        self._providers.append(factory)
        return self

    def secret_resolver(self, resolver: SecretResolver) -> Self:
        self._secret_resolver = resolver
        return self

    def result_sink(self, sink: ResultSink) -> Self:
        """A sink shared by every run of the engine; it must accept concurrent runs' results."""
        self._result_sink = sink
        return self

    def result_sink_factory(self, factory: ResultSinkFactory) -> Self:
        """Called once per run; the sink belongs to that run and is closed with it."""
        self._result_sink_factory = factory
        return self

    def event_sink(self, sink: RunEventSink) -> Self:
        self._event_sink = sink
        return self

    def event_sink_factory(self, factory: EventSinkFactory) -> Self:
        self._event_sink_factory = factory
        return self

    def artifact_sink_factory(self, factory: ArtifactSinkFactory) -> Self:
        self._artifact_sink_factory = factory
        return self

    def clock(self, clock: ExecutionClock) -> Self:
        self._clock = clock
        return self

    def options(self, options: EngineOptions) -> Self:
        self._options = options
        return self

    def build(self) -> WePushEngine:
        problems: list[str] = []
        providers: dict[str, ProviderFactory] = {}
        for factory in self._providers:
            provider_id = factory.descriptor().provider_id
            if provider_id in providers:
                problems.append(f"provider {provider_id!r} was registered twice")
            providers[provider_id] = factory
        if not providers:
            problems.append("register at least one provider")
        if (self._result_sink is None) == (self._result_sink_factory is None):
            problems.append("set exactly one of result_sink and result_sink_factory")
        if self._event_sink is not None and self._event_sink_factory is not None:
            problems.append("set at most one of event_sink and event_sink_factory")
        if problems:
            raise ValueError("invalid WePushEngine configuration: " + "; ".join(problems))
        return WePushEngine(
            EngineConfiguration(
                providers=providers,
                secret_resolver=self._secret_resolver or MappingSecretResolver({}),
                clock=self._clock or SystemClock(),
                options=self._options or EngineOptions(),
                result_sink=self._result_sink,
                result_sink_factory=self._result_sink_factory,
                event_sink=self._event_sink,
                event_sink_factory=self._event_sink_factory,
                artifact_sink_factory=self._artifact_sink_factory,
            )
        )
