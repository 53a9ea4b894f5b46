"""What an execution tells the host's metrics: its provider calls and retries (through the engine's
``ExecutionObserver``), and its item counts and in-flight calls as its progress is stored."""

from __future__ import annotations

from typing import Protocol

from wepush.agent.engine import ExecutionObserver
from wepush.server.domain import RunCounts

__all__ = ["ExecutionMetrics", "RunMeter"]


class RunMeter(Protocol):
    """The metrics of one run while this instance executes it. Must not block or raise."""

    @property
    def observer(self) -> ExecutionObserver:
        """Handed to the engine for the run's provider calls and retries."""
        ...

    def progress(self, counts: RunCounts, in_flight: int) -> None:
        """The run's counts so far (cumulative, as stored) and the calls now in flight."""
        ...

    def finished(self, counts: RunCounts | None) -> None:
        """The execution ended here: with the run's final counts, or ``None`` when it stopped without
        them (lease lost, shutdown); nothing of it is in flight any more. Only the first call counts."""
        ...


class ExecutionMetrics(Protocol):
    def meter(self, provider_id: str) -> RunMeter:
        """A meter for one run of ``provider_id``."""
        ...
