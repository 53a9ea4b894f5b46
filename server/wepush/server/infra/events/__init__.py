"""Run events for live clients: the SSE broker (one shared poller per run, bounded fan-out)."""

from __future__ import annotations

from ._broker import DEFAULT_POLL_INTERVAL, DEFAULT_QUEUE_SIZE, RunEventBroker
from ._source import RunEventSource, StoredRunEvents
from ._subscriber import RunEventSubscriber

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_QUEUE_SIZE",
    "RunEventBroker",
    "RunEventSource",
    "RunEventSubscriber",
    "StoredRunEvents",
]
