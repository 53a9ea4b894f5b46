"""Prometheus metrics of one Service instance (``GET /metrics``)."""

from __future__ import annotations

from ._prometheus import PrometheusMetrics

__all__ = ["PrometheusMetrics"]
