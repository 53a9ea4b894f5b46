"""Filtered keyset pages over repositories that cannot filter by everything the API offers.

The repository is read in batches in its own stable order and non-matching rows are skipped; the page
ends after ``limit`` matches (one more match proves ``hasMore``). The work per request is bounded: after
``max_scanned`` rows the page ends early with a cursor after the last row examined, so a sparse filter
over a long history costs several requests, never one unbounded one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from wepush.server.domain import Keyset, Page, PageRequest

__all__ = ["SCAN_BATCH", "scan_page"]

T = TypeVar("T")

SCAN_BATCH: Final = 200
MAX_SCANNED: Final = 5000


async def scan_page(
    fetch: Callable[[PageRequest[Keyset]], Awaitable[Page[T, Keyset]]],
    request: PageRequest[Keyset],
    *,
    keep: Callable[[T], bool],
    key: Callable[[T], Keyset],
    max_scanned: int = MAX_SCANNED,
) -> Page[T, Keyset]:
    items: list[T] = []
    after = request.after
    scanned = 0
    while True:
        batch = await fetch(PageRequest(limit=SCAN_BATCH, after=after))
        last = len(batch.items) - 1
        for index, item in enumerate(batch.items):
            scanned += 1
            if keep(item):
                if len(items) == request.limit:
                    return Page(items, key(items[-1]))
                items.append(item)
            after = key(item)
            exhausted = index == last and batch.next_after is None
            if scanned >= max_scanned and not exhausted:
                return Page(items, after)
        if batch.next_after is None:
            return Page(items, None)
