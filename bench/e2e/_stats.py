"""Latency percentiles and dispatch stalls, computed the same way for both contenders."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from itertools import pairwise


def percentiles(latencies_ms: Sequence[float]) -> dict[str, float | None]:
    """P50/P95/P99 (inclusive method); ``None`` when there is nothing to measure."""
    if len(latencies_ms) < 2:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 3), "p95_ms": round(cuts[94], 3), "p99_ms": round(cuts[98], 3)}


Span = tuple[float, float, int]
"""One item: (startedAt, finishedAt) in seconds since the epoch, and its sequence."""


def dispatch_gaps(
    spans: Sequence[Span], *, read_batch_size: int, threshold_s: float = 0.010
) -> dict[str, float | int | None]:
    """Where dispatch stood still: gaps of at least ``threshold_s`` between one item start and the next,
    and how many items were in flight on average (the concurrency the run really used).

    A gap whose next item opens a recipient read batch (sequence ≡ 1 mod ``read_batch_size``) is
    dispatch waiting for the recipient source. The Service's artifact gives millisecond timestamps,
    hence the 10 ms threshold for both contenders.
    """
    if not spans:
        return dict.fromkeys(
            (
                "mean_in_flight",
                "dispatch_gaps",
                "dispatch_gap_s",
                "dispatch_gaps_at_read_batch",
                "dispatch_gap_at_read_batch_s",
            )
        )
    ordered = sorted(spans)
    gaps = [
        (later[0] - earlier[0], later[2])
        for earlier, later in pairwise(ordered)
        if later[0] - earlier[0] >= threshold_s
    ]
    at_read = [gap for gap, sequence in gaps if (sequence - 1) % read_batch_size == 0]
    duration = max(finished for _, finished, _ in spans) - ordered[0][0]
    busy = sum(finished - started for started, finished, _ in spans)
    return {
        "mean_in_flight": round(busy / duration, 1) if duration > 0 else None,
        "dispatch_gaps": len(gaps),
        "dispatch_gap_s": round(sum(gap for gap, _ in gaps), 2),
        "dispatch_gaps_at_read_batch": len(at_read),
        "dispatch_gap_at_read_batch_s": round(sum(at_read), 2),
    }
