"""Newest-first pages over revision-numbered children (message revisions, audience snapshots).

The repositories list these oldest first by revision. Revision numbers are dense from 1 to the parent's
latest revision, so a newest-first page is the oldest-first window just below the previous page's lowest
revision, reversed. The page position is that exclusive upper bound.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from wepush.server.domain import Page, PageRequest

__all__ = ["newest_first"]

T = TypeVar("T")


async def newest_first(
    fetch: Callable[[PageRequest[int]], Awaitable[Page[T, int]]],
    page: PageRequest[int],
    *,
    latest: int,
    position: Callable[[T], int],
) -> Page[T, int]:
    below = latest + 1 if page.after is None else min(page.after, latest + 1)
    lowest = max(1, below - page.limit)
    if below <= lowest:
        return Page([], None)
    window = await fetch(PageRequest(limit=below - lowest, after=lowest - 1))
    items = [item for item in window.items if position(item) < below]
    items.reverse()
    return Page(items, lowest if lowest > 1 else None)
