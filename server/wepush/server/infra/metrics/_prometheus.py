"""``PrometheusMetrics``: the seed's metrics for one Service instance, in one registry of its own.

Two kinds of figures, told apart in ``docs/api.md``:

* **Counted by this instance** (add them up across instances): HTTP requests per operation; and from its
  agent, provider requests, their durations and retries (from the engine's ``ExecutionObserver``), item
  results and calls in flight (from the run progress each execution stores).
* **Read from the shared database at each scrape** (the same on every instance; take one, or ``max``):
  runs per state, expired leases, the live agents' heartbeat age, active runs and outbox, artifact bytes.

Labels are low-cardinality by design (the seed: no run or agent *ids*): providers, states, categories,
artifact types and agent names, which an operator chooses and which stay few.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wepush.agent.engine import ErrorCategory, ExecutionObserver, ItemState, ProviderResult
from wepush.server.domain import TERMINAL_RUN_STATES, RunCounts
from wepush.server.infra.db import StoredFigures

__all__ = ["PrometheusMetrics"]

_log = logging.getLogger("wepush.server.metrics")

#: How long a scrape waits for the database before it answers with this instance's own figures only.
READ_TIMEOUT_S = 2.0
# From a local webhook's milliseconds to a slow vendor's tens of seconds.
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TERMINAL = frozenset(state.value for state in TERMINAL_RUN_STATES)
# Item outcomes in the order RunCounts holds them.
_RESULTS = ("succeeded", "failed", "unknown", "unsent", "skipped")


class PrometheusMetrics:
    """The agent's ``ExecutionMetrics`` and the API's ``InstanceMetrics`` (requests and exposition). ``read_figures`` reads the
    shared database (``None``: this instance's own figures only)."""

    def __init__(
        self,
        read_figures: Callable[[datetime], Awaitable[StoredFigures]] | None,
        clock: Callable[[], datetime],
        build: Mapping[str, str] | None = None,
    ) -> None:
        """``build`` labels ``wepush_build_info`` (version, mode, schema revision): during a rolling
        upgrade it tells which instances already run the new release."""
        # The *_created series double the exposition for a timestamp Prometheus does not need.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self._requests = Counter(
            "wepush_provider_requests",
            "Provider calls, by the outcome the call would give its item if it were the last attempt.",
            ["provider", "result", "error_category"],
            registry=registry,
        )
        self._durations = Histogram(
            "wepush_provider_request_duration_seconds",
            "How long provider calls took.",
            ["provider"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self._retries = Counter(
            "wepush_provider_retries",
            "Retries made, by the category of the failure retried.",
            ["provider", "category"],
            registry=registry,
        )
        self._items = Counter(
            "wepush_run_items",
            "Item results of the runs this instance executed.",
            ["result", "provider"],
            registry=registry,
        )
        self._inflight = Gauge(
            "wepush_run_inflight", "Provider calls in flight, per provider.", ["provider"], registry=registry
        )
        self._http_requests = Counter(
            "wepush_http_requests",
            "HTTP requests answered, by the contract's operation id (unmatched: no operation).",
            ["operation", "method", "status"],
            registry=registry,
        )
        self._http_durations = Histogram(
            "wepush_http_request_duration_seconds",
            "How long HTTP requests took to answer (an event stream: until it ended).",
            ["operation"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self._http_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        if build:
            Gauge(
                "wepush_build_info", "This instance's release; always 1.", list(build), registry=registry
            ).labels(*build.values()).set(1)
        self._stored = _StoredFiguresCollector()
        registry.register(self._stored)
        self._read_figures = read_figures
        self._clock = clock
        self._reading_failed = False

    # ------------------------------------------------------------------ ExecutionMetrics

    def meter(self, provider_id: str) -> _RunMeter:
        return _RunMeter(self, provider_id)

    # ------------------------------------------------------------------ RequestMetrics

    def request_finished(self, operation: str, method: str, status: int, seconds: float) -> None:
        key = (operation, method, status)
        children = self._http_children.get(key)
        if children is None:
            children = self._http_children[key] = (
                self._http_requests.labels(operation, method, str(status)),
                self._http_durations.labels(operation),
            )
        children[0].inc()
        children[1].observe(max(0.0, seconds))

    # ------------------------------------------------------------------ MetricsExporter

    async def exposition(self) -> bytes:
        await self._refresh()
        return generate_latest(self.registry)

    async def _refresh(self) -> None:
        if self._read_figures is None:
            return
        try:
            figures = await asyncio.wait_for(self._read_figures(self._clock()), READ_TIMEOUT_S)
        except Exception as exc:
            # The scrape still answers with what this instance counted; the database figures are left out
            # rather than shown stale, and the failure is logged once until a reading succeeds again.
            self._stored.figures = None
            if not self._reading_failed:
                _log.warning(
                    "metrics: the database figures could not be read (%s); serving this instance's only",
                    type(exc).__name__,
                    extra={"event": "METRICS_READ_FAILED"},
                )
            self._reading_failed = True
            return
        self._stored.figures = figures
        self._reading_failed = False


class _RunMeter:
    """One run's share of the agent's figures; ``observer`` is what the engine calls per provider call."""

    __slots__ = ("_done", "_in_flight", "_items", "_last", "_metrics", "_provider", "observer")

    def __init__(self, metrics: PrometheusMetrics, provider_id: str) -> None:
        self._metrics = metrics
        self._provider = provider_id
        self._last = RunCounts()
        self._in_flight = 0
        self._done = False
        self._items = [metrics._items.labels(result, provider_id) for result in _RESULTS]
        self.observer: ExecutionObserver = _CallObserver(metrics, provider_id)

    def progress(self, counts: RunCounts, in_flight: int) -> None:
        if self._done:
            return
        self._count(counts)
        self._metrics._inflight.labels(self._provider).inc(in_flight - self._in_flight)
        self._in_flight = in_flight

    def finished(self, counts: RunCounts | None) -> None:
        if self._done:
            return
        self._done = True
        if counts is not None:
            self._count(counts)
        self._metrics._inflight.labels(self._provider).dec(self._in_flight)
        self._in_flight = 0

    def _count(self, counts: RunCounts) -> None:
        last = self._last
        for child, now, before in zip(
            self._items,
            (counts.succeeded, counts.failed, counts.unknown, counts.unsent, counts.skipped),
            (last.succeeded, last.failed, last.unknown, last.unsent, last.skipped),
            strict=True,
        ):
            if now > before:  # cumulative: a batch stored again adds nothing
                child.inc(now - before)
        self._last = counts


class _CallObserver:
    """Counts on the engine's hot path: the labelled children are looked up once per outcome."""

    __slots__ = ("_calls", "_duration", "_metrics", "_provider", "_retries")

    def __init__(self, metrics: PrometheusMetrics, provider_id: str) -> None:
        self._metrics = metrics
        self._provider = provider_id
        self._duration = metrics._durations.labels(provider_id)
        self._calls: dict[tuple[ItemState, ErrorCategory | None], Counter] = {}
        self._retries: dict[ErrorCategory | None, Counter] = {}

    def provider_call(self, result: ProviderResult, state: ItemState, seconds: float) -> None:
        key = (state, result.category)
        child = self._calls.get(key)
        if child is None:
            category = "" if result.category is None else result.category.value
            child = self._calls[key] = self._metrics._requests.labels(self._provider, state.value, category)
        child.inc()
        self._duration.observe(max(0.0, seconds))

    def retrying(self, category: ErrorCategory | None) -> None:
        child = self._retries.get(category)
        if child is None:
            label = "" if category is None else category.value
            child = self._retries[category] = self._metrics._retries.labels(self._provider, label)
        child.inc()


class _StoredFiguresCollector(Collector):
    """Yields the database figures of the last reading (nothing when it failed)."""

    def __init__(self) -> None:
        self.figures: StoredFigures | None = None

    def collect(self) -> Iterator[Metric]:
        figures = self.figures
        if figures is None:
            return
        finished = CounterMetricFamily(
            "wepush_runs", "Runs that ended, by final state and provider.", labels=["state", "provider"]
        )
        open_runs = GaugeMetricFamily(
            "wepush_runs_open", "Runs not ended yet, by state and provider.", labels=["state", "provider"]
        )
        for (state, provider), count in sorted(figures.runs.items()):
            (finished if state in _TERMINAL else open_runs).add_metric([state, provider], count)
        yield finished
        yield open_runs
        yield CounterMetricFamily(
            "wepush_lease_expired",
            "Leases that expired (their agent stopped renewing).",
            figures.expired_leases,
        )
        age = GaugeMetricFamily(
            "wepush_agent_heartbeat_age_seconds", "Since each live agent last reported.", labels=["agent"]
        )
        active = GaugeMetricFamily(
            "wepush_agent_active_runs", "Runs each agent holds a lease on.", labels=["agent"]
        )
        outbox = GaugeMetricFamily(
            "wepush_event_outbox_size", "Messages for each agent it has not acknowledged.", labels=["agent"]
        )
        for agent in sorted(figures.agents, key=lambda a: a.name):
            if agent.heartbeat_age_s is not None:
                age.add_metric([agent.name], agent.heartbeat_age_s)
            active.add_metric([agent.name], agent.active_runs)
            outbox.add_metric([agent.name], agent.outbox_size)
        yield age
        yield active
        yield outbox
        uploaded = CounterMetricFamily(
            "wepush_artifact_upload_bytes", "Bytes of the complete artifacts kept, by type.", labels=["type"]
        )
        for kind, size in sorted(figures.artifact_bytes.items()):
            uploaded.add_metric([kind], size)
        yield uploaded
