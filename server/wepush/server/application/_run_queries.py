"""Reading runs: detail views, the filtered run list, event positions, artifact pages.

Every function runs inside the caller's unit of work and only reads.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from wepush.server.application._run_errors import EventCursorExpired
from wepush.server.application._run_views import ConcurrencyView, RunListFilter, RunView
from wepush.server.application.execution import RunSnapshot
from wepush.server.domain import (
    MAX_PAGE_LIMIT,
    Agent,
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    Run,
    RunCommandState,
    RunCommandType,
    RunEvent,
    RunState,
    UnitOfWork,
)

_COMMAND_PAGE = 100
_MAX_COMMAND_PAGES = 20


def policy_range(snapshot: RunSnapshot) -> tuple[int, int, int]:
    """``(min, max, target)`` of the run's frozen concurrency policy."""
    concurrency = snapshot.policies.get("concurrency", {})
    return int(concurrency["min"]), int(concurrency["max"]), int(concurrency["target"])


async def target_concurrency(uow: UnitOfWork, run: Run, snapshot: RunSnapshot) -> int:
    """The latest CHANGE_CONCURRENCY target the executor did not reject, else the frozen target."""
    target = policy_range(snapshot)[2]
    after: Keyset | None = None
    for _ in range(_MAX_COMMAND_PAGES):
        page = await uow.run_commands.list_for_run(run.id, PageRequest(limit=_COMMAND_PAGE, after=after))
        for command in page.items:
            if (
                command.type is RunCommandType.CHANGE_CONCURRENCY
                and command.state is not RunCommandState.REJECTED
            ):
                target = int(command.payload.get("target", target))
        if page.next_after is None:
            break
        after = page.next_after
    return target


#: Artifacts a client may know about: deleted ones are history, not downloads.
VISIBLE_ARTIFACT_STATES: Final = frozenset(ArtifactState) - {ArtifactState.DELETING, ArtifactState.DELETED}


async def visible_artifacts(
    uow: UnitOfWork, run: Run, request: PageRequest[Keyset], artifact_types: Collection[str] | None = None
) -> Page[Artifact, Keyset]:
    """A page of the run's artifacts a client may know about, oldest first. Deleted ones are history, not
    downloads; so is a FAILED one another artifact of its type replaced (a recovery or a rebuild wrote the
    file again after its upload was given up): a client taking the first file of a type gets the one it
    can download."""
    return await uow.artifacts.list_page(
        run.workspace_id,
        ArtifactOwnerType.RUN,
        run.id,
        request,
        states=VISIBLE_ARTIFACT_STATES,
        artifact_types=artifact_types,
        without_replaced_failures=True,
    )


async def _all_visible_artifacts(uow: UnitOfWork, run: Run) -> tuple[Artifact, ...]:
    found: list[Artifact] = []
    after: Keyset | None = None
    while True:
        page = await visible_artifacts(uow, run, PageRequest(limit=MAX_PAGE_LIMIT, after=after))
        found += page.items
        if page.next_after is None:
            return tuple(found)
        after = page.next_after


async def run_view(uow: UnitOfWork, run: Run, now: datetime) -> RunView:
    snapshot = RunSnapshot.from_json(run.snapshot)
    low, high, _ = policy_range(snapshot)
    artifacts = await _all_visible_artifacts(uow, run)
    lease = await uow.leases.find_active(run.id)
    agent: Agent | None = None
    if lease is not None:
        try:
            agent = await uow.agents.get(lease.workspace_id, lease.agent_id)
        except NotFound:
            # An agent of another workspace (or one removed since): the lease summary still shows.
            agent = None
    audience = await uow.audiences.get_snapshot(run.workspace_id, snapshot.audience.snapshot_id)
    progress = await uow.run_events.latest(run.id, "PROGRESS") if run.state in _LIVE else None
    return RunView(
        run=run,
        snapshot=snapshot,
        audience_revision=audience.revision,
        concurrency=ConcurrencyView(
            current=run.current_concurrency,
            target=await target_concurrency(uow, run, snapshot),
            min=low,
            max=high,
        ),
        artifacts=artifacts,
        lease=lease,
        agent=agent,
        now=now,
        live_in_flight=_in_flight(progress),
    )


#: States whose items can be in flight: their detail reads the latest PROGRESS event for the figure.
_LIVE = frozenset({RunState.RUNNING, RunState.PAUSED, RunState.CANCELLING})


def _in_flight(progress: RunEvent | None) -> int | None:
    value = None if progress is None else progress.data.get("inFlight")
    return value if isinstance(value, int) and value >= 0 else None


async def list_runs(
    uow: UnitOfWork, workspace_id: str, request: PageRequest[Keyset], filters: RunListFilter
) -> Page[Run, Keyset]:
    """Newest first. ``createdBefore`` (exclusive) becomes the starting keyset of the first page;
    ``createdAfter`` (inclusive) ends the listing at the first older run."""
    if request.after is None and filters.created_before is not None:
        # No id sorts below "", so this position means "created strictly before".
        request = PageRequest(limit=request.limit, after=Keyset(filters.created_before, ""))
    page = await uow.runs.list_page(workspace_id, request, states=filters.states, job_id=filters.job_id)
    if filters.created_after is None:
        return page
    cutoff = filters.created_after
    kept = [run for run in page.items if run.created_at >= cutoff]
    if len(kept) < len(page.items):
        return Page(kept, None)
    return page


def check_event_position(run: Run, after: int, oldest: int | None) -> None:
    """Refuse a position whose next event was purged (410 CURSOR_EXPIRED): the client must reload the
    run detail instead of silently missing events."""
    if after >= run.last_event_sequence:
        return
    first_retained = oldest if oldest is not None else run.last_event_sequence + 1
    if after + 1 < first_retained:
        raise EventCursorExpired(run.id, after, first_retained)
