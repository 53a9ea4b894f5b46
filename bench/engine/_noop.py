"""A provider that does nothing, and sinks that only count: the engine's own overhead."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from wepush.agent.engine import (
    ArtifactRef,
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    ItemResult,
    ProviderCapabilities,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderResult,
    ProviderSchemas,
    ProviderSendRequest,
    ProviderSession,
    RunEvent,
    RunEventType,
    SecretResolver,
    ThreadSafetyMode,
    ValidationResult,
)

__all__ = ["CountingArtifactSink", "CountingEventSink", "CountingResultSink", "NoopProviderFactory"]

_OK = ProviderResult.ok()
_OBJECT = {"type": "object"}


class _NoopSession(ProviderSession):
    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        return _OK

    async def close(self) -> None:
        return None


class NoopProviderFactory:
    def __init__(self) -> None:
        self._descriptor = ProviderDescriptor(
            provider_id="bench.noop",
            display_name="No-op (benchmark)",
            version="1.0.0",
            capabilities=ProviderCapabilities(dry_run=True),
            thread_safety=ThreadSafetyMode.THREAD_SAFE,
            schemas=ProviderSchemas(account=_OBJECT, message=_OBJECT, recipient=_OBJECT, ui=_OBJECT),
        )

    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.valid()

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.valid()

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - SPI signature
    ) -> ConnectionTestResult:
        return ConnectionTestResult(True)

    async def open(self, context: ProviderOpenContext) -> ProviderSession:
        return _NoopSession()


class CountingResultSink:
    """Keeps nothing but counts and, optionally, per-item latency in milliseconds."""

    def __init__(self, *, keep_latency: bool = False) -> None:
        self.count = 0
        self.succeeded = 0
        self.latencies_ms: list[float] = []
        self._keep_latency = keep_latency

    async def open(self) -> None:
        return None

    async def append(self, batch: Sequence[ItemResult]) -> None:
        self.count += len(batch)
        for item in batch:
            if item.error_category is None:
                self.succeeded += 1
            if self._keep_latency and item.started_at is not None and item.finished_at is not None:
                self.latencies_ms.append((item.finished_at - item.started_at).total_seconds() * 1000.0)

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


class CountingEventSink:
    def __init__(self) -> None:
        self.events = 0
        self.progress = 0

    async def publish(self, events: Sequence[RunEvent]) -> None:
        self.events += len(events)
        self.progress += sum(1 for e in events if e.type is RunEventType.PROGRESS)

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


class CountingArtifactSink:
    async def open(self) -> None:
        return None

    async def write(self, item_result: ItemResult) -> None:
        return None

    async def close(self) -> tuple[ArtifactRef, ...]:
        return ()
