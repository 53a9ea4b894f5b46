"""Builders shared by the engine tests: a spec, in-memory ports on a fake clock, and a run driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from wepush.agent.engine import (
    ArtifactSink,
    ConcurrencyPolicy,
    ConfigDocument,
    EngineOptions,
    ExecutionEngine,
    ExecutionObserver,
    ExecutionPolicies,
    ExecutionPorts,
    ItemState,
    MappingSecretResolver,
    ProviderRef,
    RetryPolicy,
    RunExecutionSpec,
    RunHandle,
    RunState,
    RunSummary,
    SecretRef,
    TextRedactor,
    TimeoutPolicy,
)
from wepush.agent.engine.testing import (
    FakeClock,
    InMemoryArtifactSink,
    InMemoryEventSink,
    InMemoryRecipientSource,
    InMemoryResultSink,
)
from wepush.agent.providers.fake import FakeProviderFactory

FAKE_ID = "wepush.fake"
TOKEN_REF = SecretRef("accounts", "fake-token")
TOKEN_VALUE = "s3cr3t-token-value"


def policies(
    *,
    concurrency: ConcurrencyPolicy | None = None,
    retry: RetryPolicy | None = None,
    timeout: TimeoutPolicy | None = None,
    **others: Any,
) -> ExecutionPolicies:
    return ExecutionPolicies(
        concurrency=concurrency or ConcurrencyPolicy(min=1, max=32, target=4),
        retry=retry or RetryPolicy(jitter=timedelta(0)),
        timeout=timeout or TimeoutPolicy(item=timedelta(minutes=2), run=None),
        **others,
    )


def spec(
    run_id: str = "run-1", *, policy: ExecutionPolicies | None = None, dry_run: bool = False
) -> RunExecutionSpec:
    return RunExecutionSpec(
        run_id=run_id,
        provider=ProviderRef(FAKE_ID),
        account_config=ConfigDocument.from_json("fake.account", "1", {"name": "acct"}),
        message_config=ConfigDocument.from_json("fake.message", "1", {"text": "hello {address}"}),
        policies=policy or policies(),
        attributes={"origin": "test"},
        dry_run=dry_run,
    )


@dataclass
class Harness:
    """One run's worth of fakes, wired together."""

    count: int = 0
    clock: FakeClock = field(default_factory=FakeClock)
    results: InMemoryResultSink = field(default_factory=InMemoryResultSink)
    events: InMemoryEventSink = field(default_factory=InMemoryEventSink)
    artifacts: ArtifactSink = field(default_factory=InMemoryArtifactSink)
    source: InMemoryRecipientSource | None = None
    secrets: MappingSecretResolver = field(
        default_factory=lambda: MappingSecretResolver({TOKEN_REF: TOKEN_VALUE})
    )
    redactor: TextRedactor | None = None
    observer: ExecutionObserver | None = None

    def __post_init__(self) -> None:
        if self.source is None:
            self.source = InMemoryRecipientSource(self.count, settled=lambda: self.results.count)

    @property
    def ports(self) -> ExecutionPorts:
        assert self.source is not None
        return ExecutionPorts(
            self.source,
            self.secrets,
            self.results,
            self.artifacts,
            self.events,
            self.clock,
            self.redactor,
            self.observer,
        )

    def engine(self, provider: FakeProviderFactory, options: EngineOptions | None = None) -> ExecutionEngine:
        return ExecutionEngine({FAKE_ID: provider}, options)

    async def start(
        self,
        provider: FakeProviderFactory,
        run_spec: RunExecutionSpec | None = None,
        options: EngineOptions | None = None,
        **start_kwargs: Any,
    ) -> RunHandle:
        return await self.engine(provider, options).start(run_spec or spec(), self.ports, **start_kwargs)

    async def run(
        self,
        provider: FakeProviderFactory,
        run_spec: RunExecutionSpec | None = None,
        options: EngineOptions | None = None,
    ) -> RunSummary:
        handle = await self.start(provider, run_spec, options)
        return await self.clock.run(handle.completion())

    def states(self) -> dict[ItemState, int]:
        return dict(self.results.states())


def state_of(handle: RunHandle) -> RunState:
    """Read the state afresh (mypy would otherwise keep an earlier narrowing across awaits)."""
    return handle.state


def assert_accounted(summary: RunSummary, harness: Harness) -> None:
    """The count identity holds and every recipient has exactly one result."""
    assert (
        summary.total
        == summary.succeeded + summary.failed + summary.unknown + summary.unsent + summary.skipped
    )
    assert harness.source is not None
    assert summary.total == harness.source.emitted
    assert harness.results.count == summary.total
    assert all(n == 1 for n in harness.results.item_ids.values())
    states = harness.results.states()
    assert states[ItemState.SUCCEEDED] == summary.succeeded
    assert states[ItemState.FAILED] == summary.failed
    assert states[ItemState.UNKNOWN] == summary.unknown
    assert states[ItemState.UNSENT] == summary.unsent
    assert states[ItemState.SKIPPED] == summary.skipped
