"""How an executing run ends: with the outcomes its item rows hold, never with counts nothing backs.

The engine counts every recipient it finalised, but an outcome it could not record (its result sink gave
up) or a recipient it never read (its source failed) has no item row: ending the run with the engine's
counts would leave recipients that no ``resend`` can find. So the executor ends a run with counts read
from the rows, and when they do not cover every recipient it settles the rest first, as a recovery would
(``settle_items``).
"""

from __future__ import annotations

from collections.abc import Sequence

from wepush.agent.engine import ExecutionError
from wepush.server.domain import ItemState, RunCounts, RunState, UnitOfWorkFactory

__all__ = ["counts_json", "final_reason", "final_state", "recorded_counts"]

_FINAL = frozenset(
    {ItemState.SUCCEEDED, ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT, ItemState.SKIPPED}
)


async def recorded_counts(uow: UnitOfWorkFactory, run_id: str, recipients: int) -> RunCounts | None:
    """The run's counts as its item rows hold them (``retried`` 0); ``None`` unless every one of its
    ``recipients`` has a row with a final outcome."""
    async with uow(read_only=True) as unit:
        rows = await unit.run_items.count_by_state(run_id)
    if sum(rows.values()) != recipients or not rows.keys() <= _FINAL:
        return None
    return RunCounts(
        total=recipients,
        succeeded=rows.get(ItemState.SUCCEEDED, 0),
        failed=rows.get(ItemState.FAILED, 0),
        unknown=rows.get(ItemState.UNKNOWN, 0),
        unsent=rows.get(ItemState.UNSENT, 0),
        skipped=rows.get(ItemState.SKIPPED, 0),
    )


def final_state(engine: RunState, counts: RunCounts) -> RunState:
    """The engine's verdict, unless the recorded outcomes say otherwise (some were settled for it)."""
    if engine is RunState.CANCELLED:
        return engine
    if engine is RunState.SUCCEEDED and counts.succeeded + counts.skipped == counts.total:
        return engine
    return RunState.PARTIAL if counts.succeeded else RunState.FAILED


def final_reason(
    counts: RunCounts,
    final: RunState,
    cancel_reason: str | None,
    stop: str | None,
    suppressed: Sequence[ExecutionError],
) -> str | None:
    if final is RunState.SUCCEEDED:
        return None
    if final is RunState.CANCELLED:
        return cancel_reason or "cancelled by command"
    parts = [f"stopped: {stop}"] if stop else []
    outcome = [
        f"{n} {name}"
        for n, name in ((counts.failed, "failed"), (counts.unknown, "unknown"), (counts.unsent, "unsent"))
        if n
    ]
    if outcome:
        parts.append(", ".join(outcome))
    if suppressed:
        parts.append("errors: " + ", ".join(sorted({e.code for e in suppressed})))
    return "; ".join(parts) or None


def counts_json(counts: RunCounts) -> dict[str, int]:
    return {
        "total": counts.total,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "unknown": counts.unknown,
        "unsent": counts.unsent,
        "skipped": counts.skipped,
        "retried": counts.retried,
    }
