"""Account for every recipient of a run that cannot finish normally.

Walks the run's recipients in sequence order beside the stored item results. A recipient without a final
result gets one: UNKNOWN when its sequence is at or below the dispatch high-water mark (it may have been
sent), UNSENT above it (it never reached the engine). Every recipient's outcome is written to the result
artifacts, so the count identity holds and each recipient appears in exactly one outcome file; the files
are written anew (``supersede_artifacts`` first sets aside the ones an executor left).

Recovery settles a run whose executor was lost; an executor settles its own run when the engine stopped
with outcomes it could not record or recipients it never read (``SettleCause.unrecorded``), so that no
run ends with counts its item rows do not back.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from wepush.agent.engine import ErrorCategory
from wepush.agent.engine import ItemResult as EngineItemResult
from wepush.agent.engine import ItemState as EngineItemState
from wepush.server.domain import (
    ArtifactOwnerType,
    ArtifactState,
    ItemState,
    PageRequest,
    Recipient,
    RunCounts,
    RunItem,
    UnitOfWorkFactory,
)

from ._artifacts import ResultArtifacts
from ._fence import Retry, TransactionScope, retrying
from ._recipients import RecipientScope, read_recipients
from ._results import engine_result, stored_result
from ._spec import recipient_record
from ._store import ArtifactStore

__all__ = [
    "SETTLED_CODE",
    "UNRECORDED_CODE",
    "SettleCause",
    "SettledItems",
    "settle_items",
    "supersede_artifacts",
]

_log = logging.getLogger(__name__)

SETTLED_CODE = "EXECUTOR_LOST"
UNRECORDED_CODE = "OUTCOME_NOT_RECORDED"


@dataclass(frozen=True, slots=True)
class SettleCause:
    """What each item given an outcome here carries: ``provider_code`` and ``diagnostic``."""

    code: str | None
    diagnostic: str | None

    @classmethod
    def executor_lost(cls, reason: str) -> SettleCause:
        return cls(SETTLED_CODE, reason)

    @classmethod
    def unrecorded(cls, stop_reason: str | None) -> SettleCause:
        """The executor itself settles its run: the engine stopped (``stop_reason``) with outcomes it could
        not record, or before it read every recipient."""
        why = f" ({stop_reason})" if stop_reason else ""
        return cls(UNRECORDED_CODE, f"the run stopped{why} before an outcome was recorded")

    @classmethod
    def refused(cls, code: str) -> SettleCause:
        """The run was refused before anything was sent (its provider session could not open, its
        configuration was invalid): each item carries the run's own code, no executor was lost."""
        return cls(code, f"the run was refused before dispatch ({code})")


_FINAL = frozenset(
    {ItemState.SUCCEEDED, ItemState.FAILED, ItemState.UNKNOWN, ItemState.UNSENT, ItemState.SKIPPED}
)


@dataclass(frozen=True, slots=True)
class SettledItems:
    counts: RunCounts
    """Outcome counts over all recipients (``retried`` is not known here and left 0)."""
    unknown_added: int
    unsent_added: int


def _settled(
    scope: RecipientScope,
    recipient: Recipient,
    state: EngineItemState,
    cause: SettleCause,
    now: datetime,
) -> EngineItemResult:
    record = recipient_record(scope.run_id, recipient)
    return EngineItemResult(
        run_id=scope.run_id,
        item_id=record.item_id,
        sequence=record.sequence,
        state=state,
        attempt=1 if state is EngineItemState.UNKNOWN else 0,
        error_category=ErrorCategory.UNKNOWN if state is EngineItemState.UNKNOWN else None,
        provider_code=cause.code,
        diagnostic=cause.diagnostic,
        finished_at=now,
        recipient=record.fields,
    )


async def _settle_page(
    tx: TransactionScope,
    scope: RecipientScope,
    after: int | None,
    batch_size: int,
    dispatched_through: int,
    cause: SettleCause,
    clock: Callable[[], datetime],
) -> tuple[list[Recipient], dict[int, RunItem], dict[int, EngineItemResult]]:
    """One transaction: a page of recipients, their stored outcomes, and a result for each one missing."""
    async with tx() as uow:
        page = await read_recipients(uow, scope, after, batch_size)
        if not page.items:
            return [], {}, {}
        last = page.items[-1].sequence
        # At most one item per recipient lies in (after, last], so one page of the same size holds them all.
        stored = await uow.run_items.list_page(scope.run_id, PageRequest(limit=len(page.items), after=after))
        known = {i.sequence: i for i in stored.items if i.sequence <= last and i.state in _FINAL}
        now = clock()
        fresh = {
            r.sequence: _settled(
                scope,
                r,
                EngineItemState.UNKNOWN if r.sequence <= dispatched_through else EngineItemState.UNSENT,
                cause,
                now,
            )
            for r in page.items
            if r.sequence not in known
        }
        await uow.run_items.record_results(
            scope.workspace_id, scope.run_id, [stored_result(f) for f in fresh.values()]
        )
    return page.items, known, fresh


async def settle_items(
    *,
    tx: TransactionScope,
    scope: RecipientScope,
    dispatched_through: int,
    artifacts: ResultArtifacts,
    cause: SettleCause,
    clock: Callable[[], datetime],
    batch_size: int = 500,
    retry: Retry = retrying,
) -> SettledItems:
    """``retry`` runs each page's transaction: an executor settling its own run passes its lease's."""
    tally: Counter[str] = Counter()
    added: Counter[EngineItemState] = Counter()
    after: int | None = None
    while True:
        recipients, known, fresh = await retry(
            partial(_settle_page, tx, scope, after, batch_size, dispatched_through, cause, clock)
        )
        if not recipients:
            break
        for recipient in recipients:
            if recipient.sequence in fresh:
                result = fresh[recipient.sequence]
                added[result.state] += 1
            else:
                fields = recipient_record(scope.run_id, recipient).fields
                result = engine_result(known[recipient.sequence], fields)
            tally[result.state.value] += 1
            try:
                await artifacts.write(result)
            except Exception:  # noqa: S112 - the file is already marked FAILED; the outcome is stored
                continue
        after = recipients[-1].sequence
    counts = RunCounts(
        total=sum(tally.values()),
        succeeded=tally[ItemState.SUCCEEDED.value],
        failed=tally[ItemState.FAILED.value],
        unknown=tally[ItemState.UNKNOWN.value],
        unsent=tally[ItemState.UNSENT.value],
        skipped=tally[ItemState.SKIPPED.value],
    )
    return SettledItems(counts, added[EngineItemState.UNKNOWN], added[EngineItemState.UNSENT])


async def supersede_artifacts(
    uow: UnitOfWorkFactory,
    tx: TransactionScope,
    store: ArtifactStore,
    workspace_id: str,
    run_id: str,
    *,
    keep: Collection[str] = (),
) -> None:
    """Make way for files rebuilt from the database: the run's unfinished artifacts fail, finished ones
    are deleted; artifact types in ``keep`` are left alone."""
    async with uow(read_only=True) as unit:
        left = await unit.artifacts.list_for_owner(workspace_id, ArtifactOwnerType.RUN, run_id)
    for artifact in left:
        if artifact.artifact_type in keep:
            continue
        if artifact.state is ArtifactState.UPLOADING:
            async with tx() as unit:
                await unit.artifacts.update(replace(artifact, state=ArtifactState.FAILED))
            _set_aside(workspace_id, run_id, artifact.id, artifact.artifact_type)
        elif artifact.state is ArtifactState.READY:
            async with tx() as unit:
                deleting = await unit.artifacts.update(replace(artifact, state=ArtifactState.DELETING))
            await store.delete(deleting.storage_key)
            async with tx() as unit:
                await unit.artifacts.mark_deleted(deleting.id)


def _set_aside(workspace_id: str, run_id: str, artifact_id: str, artifact_type: str) -> None:
    """The line that tells an operator why a run lists a FAILED file beside a READY one of its type."""
    _log.warning(
        "run %s: the %s artifact %s was left unfinished by its executor and is set aside (FAILED); "
        "the file is written anew from what the database keeps",
        run_id,
        artifact_type,
        artifact_id,
        extra={
            "event": "ARTIFACT_UPLOAD_FAILED",
            "workspaceId": workspace_id,
            "runId": run_id,
            "artifactId": artifact_id,
            "artifactType": artifact_type,
        },
    )
