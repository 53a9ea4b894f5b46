"""What ``PrometheusMetrics`` exposes from what the engine and the stored progress tell it, and from the
database figures it reads at each scrape."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from wepush.agent.engine import ErrorCategory, ItemState, ProviderResult
from wepush.server.domain import RunCounts
from wepush.server.infra.db import AgentFigures, StoredFigures
from wepush.server.infra.metrics import PrometheusMetrics

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
HTTP = "wepush.http"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(text: bytes) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }


def _at(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _figures(**changes: object) -> StoredFigures:
    values: dict[str, object] = {
        "runs": {
            ("SUCCEEDED", HTTP): 3,
            ("PARTIAL", HTTP): 1,
            ("RUNNING", HTTP): 2,
            ("PENDING", "wepush.fake"): 1,
        },
        "expired_leases": 4,
        "agents": (
            AgentFigures(name="embedded@host:18990", heartbeat_age_s=2.5, active_runs=2, outbox_size=0),
            AgentFigures(name="never-reported", heartbeat_age_s=None, active_runs=0, outbox_size=3),
        ),
        "artifact_bytes": {"FAILED_ITEMS": 120, "RUN_LOG": 4096},
    }
    values.update(changes)
    return StoredFigures(**values)  # type: ignore[arg-type]


async def _exposed(metrics: PrometheusMetrics) -> Samples:
    return _samples(await metrics.exposition())


async def test_provider_calls_and_retries_are_counted_per_provider_outcome_and_category() -> None:
    metrics = PrometheusMetrics(None, lambda: NOW)
    observer = metrics.meter(HTTP).observer
    busy = ProviderResult.failure(ErrorCategory.TEMPORARY_REMOTE, "HTTP_503")
    observer.provider_call(busy, ItemState.FAILED, 0.2)
    observer.retrying(ErrorCategory.TEMPORARY_REMOTE)
    observer.provider_call(ProviderResult.ok(), ItemState.SUCCEEDED, 0.03)
    metrics.meter(HTTP).observer.provider_call(ProviderResult.ok(), ItemState.SUCCEEDED, 0.004)

    samples = await _exposed(metrics)

    requests = "wepush_provider_requests_total"
    assert _at(samples, requests, provider=HTTP, result="SUCCEEDED", error_category="") == 2
    assert _at(samples, requests, provider=HTTP, result="FAILED", error_category="TEMPORARY_REMOTE") == 1
    assert _at(samples, "wepush_provider_retries_total", provider=HTTP, category="TEMPORARY_REMOTE") == 1
    durations = "wepush_provider_request_duration_seconds"
    assert _at(samples, f"{durations}_count", provider=HTTP) == 3
    assert _at(samples, f"{durations}_bucket", provider=HTTP, le="0.005") == 1
    assert _at(samples, f"{durations}_bucket", provider=HTTP, le="0.25") == 3
    assert not any(name.endswith("_created") for name, _ in samples)


async def test_item_results_follow_the_stored_progress_and_in_flight_returns_to_zero() -> None:
    metrics = PrometheusMetrics(None, lambda: NOW)
    first, second = metrics.meter(HTTP), metrics.meter(HTTP)
    first.progress(RunCounts(total=10, succeeded=3, failed=1), in_flight=4)
    second.progress(RunCounts(total=5, succeeded=1), in_flight=2)
    # The same cumulative counts stored again (a batch published twice) add nothing.
    first.progress(RunCounts(total=10, succeeded=3, failed=1), in_flight=4)

    during = await _exposed(metrics)
    first.finished(RunCounts(total=10, succeeded=8, failed=1, unsent=1))
    first.finished(RunCounts(total=10, succeeded=9, failed=1))  # only the first call counts
    second.finished(None)  # the lease was lost: no final counts, nothing left in flight
    after = await _exposed(metrics)

    items = "wepush_run_items_total"
    assert _at(during, items, result="succeeded", provider=HTTP) == 4
    assert _at(during, "wepush_run_inflight", provider=HTTP) == 6
    assert _at(after, items, result="succeeded", provider=HTTP) == 9
    assert _at(after, items, result="failed", provider=HTTP) == 1
    assert _at(after, items, result="unsent", provider=HTTP) == 1
    assert _at(after, "wepush_run_inflight", provider=HTTP) == 0


async def test_the_database_figures_are_read_at_each_scrape() -> None:
    readings: list[datetime] = []

    async def read(now: datetime) -> StoredFigures:
        readings.append(now)
        return _figures()

    samples = await _exposed(PrometheusMetrics(read, lambda: NOW))

    assert readings == [NOW]
    assert _at(samples, "wepush_runs_total", state="SUCCEEDED", provider=HTTP) == 3
    assert _at(samples, "wepush_runs_total", state="PARTIAL", provider=HTTP) == 1
    # Runs still under way are a gauge of their own: a counter must never go down.
    assert _at(samples, "wepush_runs_total", state="RUNNING", provider=HTTP) is None
    assert _at(samples, "wepush_runs_open", state="RUNNING", provider=HTTP) == 2
    assert _at(samples, "wepush_runs_open", state="PENDING", provider="wepush.fake") == 1
    assert _at(samples, "wepush_lease_expired_total") == 4
    assert _at(samples, "wepush_agent_heartbeat_age_seconds", agent="embedded@host:18990") == 2.5
    assert _at(samples, "wepush_agent_heartbeat_age_seconds", agent="never-reported") is None
    assert _at(samples, "wepush_agent_active_runs", agent="embedded@host:18990") == 2
    assert _at(samples, "wepush_event_outbox_size", agent="never-reported") == 3
    assert _at(samples, "wepush_artifact_upload_bytes_total", type="RUN_LOG") == 4096


async def test_a_database_that_cannot_be_read_leaves_its_figures_out_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = True

    async def read(now: datetime) -> StoredFigures:
        if failing:
            raise ConnectionRefusedError("password=do-not-log")
        return _figures()

    metrics = PrometheusMetrics(read, lambda: NOW)
    metrics.meter(HTTP).observer.provider_call(ProviderResult.ok(), ItemState.SUCCEEDED, 0.01)
    caplog.set_level(logging.WARNING, logger="wepush.server.metrics")

    first = await _exposed(metrics)
    second = await _exposed(metrics)
    failing = False
    recovered = await _exposed(metrics)

    own = (
        "wepush_provider_requests_total",
        frozenset({("provider", HTTP), ("result", "SUCCEEDED"), ("error_category", "")}),
    )
    assert first[own] == second[own] == 1
    assert not any(name.startswith("wepush_runs") for name, _ in first)
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: the database figures could not be read (ConnectionRefusedError); serving this instance's only"
    ]
    assert "do-not-log" not in caplog.text
    assert _at(recovered, "wepush_lease_expired_total") == 4


async def test_every_family_is_labelled_by_low_cardinality_names_never_by_ids() -> None:
    # The seed: run and agent ids are not metric labels (they are for logs and traces).
    async def read(now: datetime) -> StoredFigures:
        return _figures()

    build = {"version": "1.2.3", "mode": "server", "schema_revision": "0007_schema_compatibility"}
    metrics = PrometheusMetrics(read, lambda: NOW, build=build)
    meter = metrics.meter(HTTP)
    meter.observer.provider_call(ProviderResult.ok(), ItemState.SUCCEEDED, 0.01)
    meter.observer.retrying(ErrorCategory.NETWORK)
    meter.progress(RunCounts(total=1, succeeded=1), in_flight=0)
    metrics.request_finished("listWorkspaces", "GET", 200, 0.002)

    samples = await _exposed(metrics)
    labels: dict[str, set[str]] = {}
    for name, pairs in samples:
        labels.setdefault(name, set()).update(key for key, _ in pairs)

    assert labels == {
        "wepush_provider_requests_total": {"provider", "result", "error_category"},
        "wepush_provider_request_duration_seconds_bucket": {"provider", "le"},
        "wepush_provider_request_duration_seconds_count": {"provider"},
        "wepush_provider_request_duration_seconds_sum": {"provider"},
        "wepush_provider_retries_total": {"provider", "category"},
        "wepush_run_items_total": {"result", "provider"},
        "wepush_run_inflight": {"provider"},
        "wepush_runs_total": {"state", "provider"},
        "wepush_runs_open": {"state", "provider"},
        "wepush_lease_expired_total": set(),
        "wepush_agent_heartbeat_age_seconds": {"agent"},
        "wepush_agent_active_runs": {"agent"},
        "wepush_event_outbox_size": {"agent"},
        "wepush_artifact_upload_bytes_total": {"type"},
        "wepush_http_requests_total": {"operation", "method", "status"},
        "wepush_http_request_duration_seconds_bucket": {"operation", "le"},
        "wepush_http_request_duration_seconds_count": {"operation"},
        "wepush_http_request_duration_seconds_sum": {"operation"},
        "wepush_build_info": {"version", "mode", "schema_revision"},
    }
    assert _at(samples, "wepush_build_info", **build) == 1
