"""Run events as the engine publishes them to a ``RunEventSink``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from ._durations import format_instant
from ._enums import RunEventType

__all__ = ["RunEvent"]


@dataclass(frozen=True, slots=True)
class RunEvent:
    """``sequence`` increases by one per run, starting at 1, so consumers can detect gaps and duplicates."""

    run_id: str
    sequence: int
    type: RunEventType
    occurred_at: datetime
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.data, MappingProxyType):
            object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "sequence": self.sequence,
            "type": self.type.value,
            "occurredAt": format_instant(self.occurred_at),
            "data": dict(self.data),
        }
