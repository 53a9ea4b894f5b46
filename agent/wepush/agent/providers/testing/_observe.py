"""Run a provider through the real ExecutionEngine while watching how its sessions are called."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ExecutionEngine,
    ExecutionPolicies,
    ExecutionPorts,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunSummary,
)
from wepush.agent.engine.testing import (
    InMemoryArtifactSink,
    InMemoryEventSink,
    InMemoryRecipientSource,
    InMemoryResultSink,
)
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    PreviewResult,
    ProviderDescriptor,
    ProviderFactory,
    ProviderOpenContext,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    SecretResolver,
    ValidationResult,
)

from ._subject import ContractSubject

__all__ = ["EngineObservation", "ObservedFactory", "run_through_engine"]

T = TypeVar("T")


@dataclass(slots=True)
class _Overlap:
    active: int = 0
    peak: int = 0


@dataclass(slots=True)
class EngineObservation:
    summary: RunSummary
    peak_per_session: list[int] = field(default_factory=list)
    peak_overall: int = 0
    sessions_opened: int = 0


class _ObservedSession(ProviderSession):
    def __init__(self, inner: ProviderSession, owner: ObservedFactory) -> None:
        self._inner = inner
        self._owner = owner
        self._overlap = _Overlap()
        owner.overlaps.append(self._overlap)

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        overlap, overall = self._overlap, self._owner.overall
        overlap.active += 1
        overall.active += 1
        overlap.peak = max(overlap.peak, overlap.active)
        overall.peak = max(overall.peak, overall.active)
        try:
            return await self._inner.send(request, token)
        finally:
            overlap.active -= 1
            overall.active -= 1

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        return await self._inner.preview(request)

    async def open_worker(self) -> ProviderSession:
        return _ObservedSession(await self._inner.open_worker(), self._owner)

    async def close(self) -> None:
        await self._inner.close()


class ObservedFactory:
    """Delegates to a factory and records peak concurrent ``send`` calls per session."""

    def __init__(self, inner: ProviderFactory) -> None:
        self._inner = inner
        self.overlaps: list[_Overlap] = []
        self.overall = _Overlap()
        self.opened = 0

    def descriptor(self) -> ProviderDescriptor:
        return self._inner.descriptor()

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        return self._inner.validate_account(config)

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        return self._inner.validate_message(config)

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - SPI signature
    ) -> ConnectionTestResult:
        return await self._inner.test_connection(account, secrets, timeout)

    async def open(self, context: ProviderOpenContext) -> ProviderSession:
        self.opened += 1
        return _ObservedSession(await self._inner.open(context), self)


async def _drive(subject: ContractSubject, awaitable: Awaitable[T]) -> T:
    # A FakeClock subject needs its time advanced; a real clock just waits.
    run: Any = getattr(subject.clock, "run", None)
    if callable(run):
        result: T = await run(awaitable)
        return result
    return await asyncio.wait_for(awaitable, timeout=60)


async def run_through_engine(subject: ContractSubject, items: int, concurrency: int) -> EngineObservation:
    """Send ``items`` recipients with ``concurrency`` workers and no retries."""
    observed = ObservedFactory(subject.factory)
    descriptor = observed.descriptor()
    spec = RunExecutionSpec(
        run_id="contract-thread-safety",
        provider=ProviderRef(descriptor.provider_id),
        account_config=subject.account,
        message_config=subject.message,
        policies=ExecutionPolicies(
            concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency),
            retry=RetryPolicy(max_attempts=1),
        ),
    )
    ports = ExecutionPorts(
        recipient_source=InMemoryRecipientSource(records=(subject.recipient(n) for n in range(1, items + 1))),
        secret_resolver=subject.secrets,
        result_sink=InMemoryResultSink(),
        artifact_sink=InMemoryArtifactSink(),
        event_sink=InMemoryEventSink(),
        clock=subject.clock,
    )
    engine = ExecutionEngine({descriptor.provider_id: observed})
    handle = await engine.start(spec, ports)
    summary = await _drive(subject, handle.completion())
    return EngineObservation(
        summary=summary,
        peak_per_session=[o.peak for o in observed.overlaps],
        peak_overall=observed.overall.peak,
        sessions_opened=observed.opened,
    )
