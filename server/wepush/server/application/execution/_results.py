"""Item results: the engine's ItemResult ↔ the domain's, and the fenced ResultSink of an executing run."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from wepush.agent.engine import ErrorCategory, RecipientValue
from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import ItemState as EngineItemState
from wepush.server.domain import (
    EXTERNAL_REQUEST_ID_MAX_CHARS,
    PROVIDER_CODE_MAX_CHARS,
    ItemResult,
    ItemState,
    RunItem,
)

from ._fence import LeaseGuard

if TYPE_CHECKING:
    from ._ledger import ExecutionLedger

__all__ = ["FencedResultSink", "engine_result", "storable_text", "stored_result"]


# A dict lookup: calling an enum by value costs more than the rest of the mapping.
_STORED_STATES = {state: ItemState(state.value) for state in EngineItemState}
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def stored_result(result: EngineItemResult) -> ItemResult:
    """What the run_item table keeps of an outcome (recipient fields and response bodies stay in artifacts)."""
    category = result.error_category
    return ItemResult(
        item_id=result.item_id,
        sequence=result.sequence,
        state=_STORED_STATES[result.state],
        attempt=result.attempt,
        error_category=None if category is None else category.value,
        provider_code=storable_text(result.provider_code, PROVIDER_CODE_MAX_CHARS),
        diagnostic=storable_text(result.diagnostic),
        external_request_id=storable_text(result.external_request_id, EXTERNAL_REQUEST_ID_MAX_CHARS),
        finished_at=result.finished_at,
    )


def storable_text(text: str | None, limit: int | None = None) -> str | None:
    """``text`` as the database can keep it. These strings come from channel vendors through a provider:
    PostgreSQL refuses NUL, no driver encodes a lone surrogate, and a VARCHAR refuses what is longer
    than it; any of them would fail the whole batch of results, and the run with it, on every retry."""
    if text is None:
        return None
    if not text.isascii() or "\x00" in text:
        text = _UNSTORABLE.sub("\ufffd", text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def engine_result(item: RunItem, recipient: Mapping[str, RecipientValue] | None) -> EngineItemResult:
    """A stored outcome as an artifact line, for artifacts rebuilt from the database (recovery)."""
    category = None
    if item.error_category is not None:
        try:
            category = ErrorCategory(item.error_category)
        except ValueError:
            category = ErrorCategory.UNKNOWN
    return EngineItemResult(
        run_id=item.run_id,
        item_id=item.item_id,
        sequence=item.sequence,
        state=EngineItemState(item.state.value),
        attempt=item.attempt,
        error_category=category,
        provider_code=item.provider_code,
        diagnostic=item.diagnostic,
        external_request_id=item.external_request_id,
        finished_at=item.finished_at,
        recipient=recipient,
    )


class FencedResultSink:
    """Appends result batches through the ledger (``run_items.record_results``) under the lease fence.
    Recording is idempotent per (item, attempt), so the engine may safely re-append a batch after a
    failure.

    A database outage is waited out while the lease may still be ours (``LeaseGuard.retrying``): the
    append does not return, the engine's result backlog fills and it stops dispatching, then everything
    carries on once the database is back. A batch the engine could not append in the end is kept in
    ``unrecorded`` (the engine drops it): the executor stores it before it settles the run.
    """

    def __init__(self, guard: LeaseGuard, ledger: ExecutionLedger, workspace_id: str, run_id: str) -> None:
        self._guard = guard
        self._ledger = ledger
        self._workspace_id = workspace_id
        self._run_id = run_id
        self.unrecorded: dict[str, EngineItemResult] = {}
        """Outcomes of failed appends not appended since, by item id."""

    async def open(self) -> None:
        async def prove() -> None:
            async with self._guard.transaction():
                pass

        await self._guard.retrying(prove)

    async def append(self, batch: Sequence[EngineItemResult]) -> None:
        guard, ledger = self._guard, self._ledger
        try:
            await guard.retrying(
                lambda: ledger.record_results(
                    guard.fence, guard.now(), self._workspace_id, self._run_id, batch
                )
            )
        except Exception:
            for result in batch:
                self.unrecorded[result.item_id] = result
            raise
        if self.unrecorded:
            for result in batch:
                self.unrecorded.pop(result.item_id, None)

    async def flush(self) -> None:
        # Every append commits its own transaction: there is nothing buffered to flush.
        return None

    async def close(self) -> None:
        return None
