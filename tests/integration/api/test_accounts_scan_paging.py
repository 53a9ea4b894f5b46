"""Filtered keyset pages over a repository page function: every match exactly once, newest first, and a
bounded amount of reading per page even when matches are sparse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from wepush.server.application._accounts_scan import SCAN_BATCH, scan_page
from wepush.server.domain import Keyset, Page, PageRequest

START = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)
ROWS = [Keyset(START + timedelta(seconds=i), f"row-{i:04d}") for i in range(1000)]
NEWEST_FIRST = sorted(ROWS, key=lambda k: (k.at, k.id), reverse=True)


class Reader:
    """A repository stand-in with the real contract: newest first, ``limit + 1`` semantics."""

    def __init__(self) -> None:
        self.rows_read = 0

    async def __call__(self, request: PageRequest[Keyset]) -> Page[Keyset, Keyset]:
        after = request.after
        rest = [k for k in NEWEST_FIRST if after is None or (k.at, k.id) < (after.at, after.id)]
        items = rest[: request.limit]
        self.rows_read += len(items)
        return Page(items, items[-1] if len(rest) > request.limit else None)


def _sparse(key: Keyset) -> bool:
    return int(key.id.removeprefix("row-")) % 97 == 0


async def _collect(limit: int, max_scanned: int) -> tuple[list[Keyset], list[int], Reader]:
    reader = Reader()
    found: list[Keyset] = []
    sizes: list[int] = []
    after: Keyset | None = None
    while True:
        page = await scan_page(
            reader,
            PageRequest(limit=limit, after=after),
            keep=_sparse,
            key=lambda k: k,
            max_scanned=max_scanned,
        )
        found.extend(page.items)
        sizes.append(len(page.items))
        if page.next_after is None:
            return found, sizes, reader
        after = page.next_after


async def test_every_match_appears_once_in_order() -> None:
    found, _, _ = await _collect(limit=3, max_scanned=5000)
    assert found == [k for k in NEWEST_FIRST if _sparse(k)]


async def test_sparse_matches_cost_bounded_reads_per_page() -> None:
    # All 11 matches would fit one page; the bound splits the 1000-row scan into several requests.
    found, sizes, reader = await _collect(limit=20, max_scanned=250)
    assert found == [k for k in NEWEST_FIRST if _sparse(k)]
    assert len(sizes) >= 4
    assert min(sizes) < max(sizes)
    # Each request reads at most max_scanned rows plus the rest of the batch it stopped in.
    assert reader.rows_read <= len(sizes) * (250 + SCAN_BATCH)


async def test_a_full_last_page_reports_no_more() -> None:
    reader = Reader()
    page = await scan_page(reader, PageRequest(limit=11), keep=_sparse, key=lambda k: k)
    assert len(page.items) == 11
    assert page.next_after is None  # exactly 11 matches exist: nothing beyond the page
