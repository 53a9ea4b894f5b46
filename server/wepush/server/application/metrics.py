"""The ``/metrics`` exposition, as the API layer sees it."""

from __future__ import annotations

from typing import Protocol

__all__ = ["METRICS_CONTENT_TYPE", "InstanceMetrics", "MetricsExporter", "RequestMetrics"]

#: The Prometheus text exposition format.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsExporter(Protocol):
    async def exposition(self) -> bytes:
        """Every metric of this instance in the Prometheus text format (``METRICS_CONTENT_TYPE``): what
        its agent counted, and the figures read from the database all instances share."""
        ...


class RequestMetrics(Protocol):
    def request_finished(self, operation: str, method: str, status: int, seconds: float) -> None:
        """One HTTP request answered (``status``) after ``seconds``; ``operation`` is the contract's
        operation id. Must not block or raise."""
        ...


class InstanceMetrics(MetricsExporter, RequestMetrics, Protocol):
    """What the API layer holds of the instance's metrics."""
