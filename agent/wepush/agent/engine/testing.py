"""Test doubles for the engine's ports: lazy recipient source, idempotent sinks, and a controllable clock.

They are part of the public API so that the agent, the server and embedding applications can test their
own wiring against the same fakes the engine tests use.
"""

from __future__ import annotations

from ._fakeclock import ClockDeadlockError, FakeClock
from ._memory import (
    InMemoryArtifactSink,
    InMemoryEventSink,
    InMemoryRecipientSource,
    InMemoryResultSink,
    ScriptedFailure,
)

__all__ = [
    "ClockDeadlockError",
    "FakeClock",
    "InMemoryArtifactSink",
    "InMemoryEventSink",
    "InMemoryRecipientSource",
    "InMemoryResultSink",
    "ScriptedFailure",
]
