"""Keyset paging. Repositories read ``limit + 1`` rows in a stable order to learn whether more exist.

The opaque, HMAC-protected cursor is the API layer's business; repositories only see the decoded position.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")

MAX_PAGE_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Keyset:
    """Position after the last row of a page ordered by ``(timestamp, id)``."""

    at: datetime
    id: str


@dataclass(frozen=True, slots=True)
class PageRequest(Generic[K]):
    """``after`` is the position of the previous page's last row, ``None`` for the first page."""

    limit: int = 50
    after: K | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_PAGE_LIMIT:
            raise ValueError(f"page limit must be between 1 and {MAX_PAGE_LIMIT}")


@dataclass(frozen=True, slots=True)
class Page(Generic[T, K]):
    """``next_after`` is the position to continue from, ``None`` when this is the last page."""

    items: list[T]
    next_after: K | None

    @property
    def has_more(self) -> bool:
        return self.next_after is not None
