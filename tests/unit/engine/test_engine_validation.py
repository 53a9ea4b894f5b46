"""Start-time validation: stable categories in the seed's order; a refused run never starts or leaks."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ConfigDocument,
    EngineOptions,
    EngineValidationError,
    ExecutionEngine,
    ProviderRef,
    RunExecutionSpec,
    ValidationCategory,
    ValidationIssue,
)
from wepush.agent.engine.testing import InMemoryArtifactSink, InMemoryRecipientSource, InMemoryResultSink
from wepush.agent.providers.fake import FakeProviderFactory

from .support import FAKE_ID, TOKEN_REF, TOKEN_VALUE, Harness, policies, spec


async def _refusal(
    h: Harness, provider: FakeProviderFactory | None, run_spec: RunExecutionSpec
) -> EngineValidationError:
    engine = ExecutionEngine({} if provider is None else {FAKE_ID: provider})
    with pytest.raises(EngineValidationError) as raised:
        await engine.start(run_spec, h.ports)
    assert h.events.events == []  # never RUNNING: not even RUN_STARTED
    return raised.value


def test_validation_categories_keep_the_seed_order() -> None:
    assert list(ValidationCategory) == [
        ValidationCategory.SPEC_INVALID,
        ValidationCategory.POLICY_INVALID,
        ValidationCategory.PROVIDER_NOT_AVAILABLE,
        ValidationCategory.SCHEMA_VERSION_UNSUPPORTED,
        ValidationCategory.PROVIDER_CONFIG_INVALID,
        ValidationCategory.RECIPIENT_SOURCE_UNAVAILABLE,
        ValidationCategory.SINK_UNAVAILABLE,
        ValidationCategory.PROVIDER_SESSION_FAILED,
    ]


async def test_an_empty_run_id_is_spec_invalid() -> None:
    error = await _refusal(Harness(), FakeProviderFactory(), spec(run_id=" "))
    assert error.category is ValidationCategory.SPEC_INVALID
    assert [v.path for v in error.violations] == ["runId"]


async def test_inconsistent_policies_are_reported_before_a_missing_provider() -> None:
    bad = spec(policy=policies(concurrency=ConcurrencyPolicy(min=5, max=2, target=3)))
    error = await _refusal(Harness(), None, bad)
    assert error.category is ValidationCategory.POLICY_INVALID
    assert {v.path for v in error.violations} >= {"concurrency.max", "concurrency.target"}


async def test_missing_provider_incompatible_spi_and_wrong_version_are_not_available() -> None:
    assert (await _refusal(Harness(), None, spec())).category is ValidationCategory.PROVIDER_NOT_AVAILABLE
    old_spi = FakeProviderFactory(spi_version="2")
    error = await _refusal(Harness(), old_spi, spec())
    assert error.category is ValidationCategory.PROVIDER_NOT_AVAILABLE
    assert "SPI 2" in error.message
    pinned = dataclasses.replace(spec(), provider=ProviderRef(FAKE_ID, "9.9.9"))
    assert (
        await _refusal(Harness(), FakeProviderFactory(), pinned)
    ).category is ValidationCategory.PROVIDER_NOT_AVAILABLE


async def test_an_unsupported_schema_version_is_refused() -> None:
    newer = ConfigDocument.from_json("fake.message", "7", {"text": "x"})
    run_spec = dataclasses.replace(spec(), message_config=newer)
    error = await _refusal(Harness(), FakeProviderFactory(), run_spec)
    assert error.category is ValidationCategory.SCHEMA_VERSION_UNSUPPORTED
    assert [v.path for v in error.violations] == ["messageConfig"]


async def test_provider_config_issues_are_returned_as_violations() -> None:
    issue = ValidationIssue("/name", "REQUIRED", "name is required")
    error = await _refusal(Harness(), FakeProviderFactory(account_issues=[issue]), spec())
    assert error.category is ValidationCategory.PROVIDER_CONFIG_INVALID
    assert error.violations == (issue,)


async def test_an_unreadable_source_is_refused_and_the_provider_is_never_opened() -> None:
    h = Harness(source=InMemoryRecipientSource(3, open_error=OSError("snapshot gone")))
    provider = FakeProviderFactory()
    error = await _refusal(h, provider, spec())
    assert error.category is ValidationCategory.RECIPIENT_SOURCE_UNAVAILABLE
    assert provider.sessions == []


async def test_an_unwritable_sink_is_refused_and_the_source_is_closed_again() -> None:
    h = Harness(count=3, results=InMemoryResultSink(open_error=PermissionError("read-only")))
    error = await _refusal(h, FakeProviderFactory(), spec())
    assert error.category is ValidationCategory.SINK_UNAVAILABLE
    assert h.source is not None
    assert h.source.closed


async def test_session_open_failure_never_runs_closes_everything_and_hides_secrets() -> None:
    artifacts = InMemoryArtifactSink()
    h = Harness(count=3, artifacts=artifacts)
    provider = FakeProviderFactory(
        open_error=RuntimeError(f"login refused token={TOKEN_VALUE}"), secret=TOKEN_REF
    )
    error = await _refusal(h, provider, spec())
    assert error.category is ValidationCategory.PROVIDER_SESSION_FAILED
    assert TOKEN_VALUE not in str(error)
    assert h.source is not None
    assert h.source.closed
    assert h.results.closed
    assert artifacts.closed
    assert h.results.results == {}


def test_engine_options_outside_their_safe_ranges_are_refused() -> None:
    with pytest.raises(ValueError, match="result_batch_size"):
        ExecutionEngine({}, EngineOptions(result_batch_size=5000))
    with pytest.raises(ValueError, match="progress_interval"):
        ExecutionEngine({}, EngineOptions(progress_interval=timedelta(seconds=5)))
