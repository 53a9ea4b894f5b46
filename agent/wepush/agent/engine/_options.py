"""Engine-wide tuning knobs with safe defaults."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["EngineOptions"]


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Queue bounds, batch sizes and intervals. Every bound exists so memory stays constant per run."""

    read_batch_size: int = 500
    """Recipients asked from the source per ``next_batch`` call."""
    read_low_water: int = 500
    """The next batch is read as soon as no more than this many read recipients wait to start, so that
    dispatch does not wait for the source; 0 reads only once every read recipient has started."""
    result_batch_size: int = 500
    """Item results per ``ResultSink.append`` (the seed recommends 100..1000)."""
    result_high_water: int = 5000
    """Dispatch and reading pause while this many results wait for the result sink."""
    progress_interval: timedelta = timedelta(seconds=1)
    """Progress events are coalesced into one per interval (0.5s..1s)."""
    event_buffer_size: int = 1000
    """Bound of unpublished events; beyond it progress events are coalesced, others are kept."""
    item_error_event_limit: int = 100
    """ITEM_ERROR events per run; further item errors are only in results and counts."""
    auth_failure_threshold: int = 3
    """Consecutive AUTHENTICATION/AUTHORIZATION outcomes that stop the run (run-level circuit breaker)."""
    capacity: int | None = None
    """Concurrency this agent can give one run; ``None`` means no agent-side cap."""
    sink_retry_attempts: int = 5
    """Attempts per append/publish/flush before a sink is declared failed."""
    sink_retry_initial_delay: timedelta = timedelta(milliseconds=200)
    sink_retry_max_delay: timedelta = timedelta(seconds=5)
    random_seed: int | None = None
    """Seed for retry jitter; set it for reproducible schedules."""

    def validate(self) -> list[str]:
        problems: list[str] = []
        if self.read_batch_size < 1:
            problems.append("read_batch_size must be at least 1")
        if self.read_low_water < 0:
            problems.append("read_low_water must not be negative")
        if not 100 <= self.result_batch_size <= 1000:
            problems.append("result_batch_size must lie within 100..1000")
        if self.result_high_water < self.result_batch_size:
            problems.append("result_high_water must be at least result_batch_size")
        if not timedelta(milliseconds=500) <= self.progress_interval <= timedelta(seconds=1):
            problems.append("progress_interval must lie within 0.5s..1s")
        if self.event_buffer_size < 16:
            problems.append("event_buffer_size must be at least 16")
        if self.item_error_event_limit < 0:
            problems.append("item_error_event_limit must not be negative")
        if self.auth_failure_threshold < 1:
            problems.append("auth_failure_threshold must be at least 1")
        if self.capacity is not None and self.capacity < 1:
            problems.append("capacity must be at least 1 when set")
        if self.sink_retry_attempts < 1:
            problems.append("sink_retry_attempts must be at least 1")
        if (
            self.sink_retry_initial_delay <= timedelta(0)
            or self.sink_retry_max_delay < self.sink_retry_initial_delay
        ):
            problems.append("sink retry delays must be positive and max >= initial")
        return problems

    def sink_retry_delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive sink failure."""
        initial = self.sink_retry_initial_delay.total_seconds()
        return min(self.sink_retry_max_delay.total_seconds(), initial * 2.0 ** max(0, failures - 1))
