"""Tally: the live item counters behind ``Counts`` and the count identity."""

from __future__ import annotations

from ._enums import ItemState

__all__ = ["Tally"]


class Tally:
    """``total`` grows as recipients are read; each one moves pending -> in flight -> one final state."""

    __slots__ = ("failed", "in_flight", "pending", "skipped", "succeeded", "total", "unknown", "unsent")

    def __init__(self) -> None:
        self.total = 0
        self.pending = 0
        self.in_flight = 0
        self.succeeded = 0
        self.failed = 0
        self.unknown = 0
        self.unsent = 0
        self.skipped = 0

    def record(self, state: ItemState) -> None:
        if state is ItemState.SUCCEEDED:
            self.succeeded += 1
        elif state is ItemState.FAILED:
            self.failed += 1
        elif state is ItemState.UNKNOWN:
            self.unknown += 1
        elif state is ItemState.UNSENT:
            self.unsent += 1
        elif state is ItemState.SKIPPED:
            self.skipped += 1
        else:
            raise ValueError(f"{state} is not a final item state")
