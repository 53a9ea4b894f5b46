"""Ports the Run use cases need beyond the unit of work: the live event feed behind SSE.

The feed is implemented in ``wepush.server.infra.events`` (one shared poller per run fanning out to
bounded per-subscriber queues); the application only opens subscriptions and forwards hints.
"""

from __future__ import annotations

from typing import Protocol

from wepush.server.domain import RunEvent


class EventStreamEnded(Exception):
    """The subscription is over: the run completed, the subscriber fell behind and was dropped (it
    reconnects with Last-Event-ID), or the Service is stopping. ``reason`` is for logs and tests."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EventSubscription(Protocol):
    """One client's view of a run's events: first the stored history after its position, then live
    events, in sequence order without gaps or duplicates."""

    async def next_event(self, idle_seconds: float) -> RunEvent | None:
        """The next event, or ``None`` when ``idle_seconds`` passed without one (time for a
        heartbeat). Raises :class:`EventStreamEnded` when nothing more will come."""
        ...

    def close(self) -> None:
        """Leave the feed; idempotent."""
        ...


class RunEventFeed(Protocol):
    def subscribe(
        self, workspace_id: str, run_id: str, *, after_sequence: int, end_at: int | None = None
    ) -> EventSubscription:
        """Events of ``run_id`` after ``after_sequence``. The subscription ends after RUN_COMPLETED, or
        once it has delivered ``end_at`` (the last sequence of a run that was already terminal)."""
        ...

    def hint(self, run_id: str) -> None:
        """New events of ``run_id`` were committed: poll now instead of at the next tick. Losing a hint
        only delays delivery by one tick."""
        ...
