"""Reading runs: list and detail, items, the event log and stream, artifacts and their download."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._run_context import ARTIFACT, RunUseCases
from wepush.server.application._run_ports import EventSubscription
from wepush.server.application._run_queries import (
    check_event_position,
    list_runs,
    run_view,
    visible_artifacts,
)
from wepush.server.application._run_views import RunItemView, RunListFilter, RunView
from wepush.server.application.auth import Principal, Role
from wepush.server.application.execution import ArtifactDownload, parse_range_header
from wepush.server.domain import (
    Artifact,
    ItemState,
    Keyset,
    Page,
    PageRequest,
    Run,
    RunEvent,
    RunState,
    UnitOfWork,
)


class RunReading(RunUseCases):
    async def list_runs(
        self, principal: Principal, workspace_id: str, page: PageRequest[Keyset], filters: RunListFilter
    ) -> Page[RunView, Keyset]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.list")
        now = self._deps.clock()
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            runs = await list_runs(uow, workspace_id, page, filters)
            views = [await run_view(uow, run, now) for run in runs.items]
        return Page(views, runs.next_after)

    async def get_run(self, principal: Principal, workspace_id: str, run_id: str) -> RunView:
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            run = await uow.runs.get(workspace_id, run_id)
            return await run_view(uow, run, self._deps.clock())

    async def list_items(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        page: PageRequest[int],
        states: Sequence[ItemState] | None = None,
    ) -> Page[RunItemView, int]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.items.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            run = await uow.runs.get(workspace_id, run_id)
            items = await uow.run_items.list_page(run_id, page, states=states or None)
            keys = await uow.audiences.recipient_item_keys(
                run.audience_snapshot_id, [item.sequence for item in items.items]
            )
        return Page([RunItemView(item, keys.get(item.sequence)) for item in items.items], items.next_after)

    async def _checked_run(self, uow: UnitOfWork, workspace_id: str, run_id: str, after: int) -> Run:
        run = await uow.runs.get(workspace_id, run_id)
        check_event_position(run, after, await uow.run_events.first_sequence(run_id))
        return run

    async def list_events(
        self, principal: Principal, workspace_id: str, run_id: str, page: PageRequest[int]
    ) -> Page[RunEvent, int]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.events.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            await self._checked_run(uow, workspace_id, run_id, page.after or 0)
            return await uow.run_events.list_page(run_id, page)

    async def open_event_stream(
        self, principal: Principal, workspace_id: str, run_id: str, after: int
    ) -> EventSubscription | None:
        """Everything after ``after``, then live events; refused up front (410) when ``after`` is older
        than the oldest retained event. ``None`` when the run has ended and ``after`` is at or past its
        last event: nothing will ever come, which a reconnecting client must learn at once rather than
        from a stream that closes empty (it would reconnect to it again and again)."""
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.events.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            run = await self._checked_run(uow, workspace_id, run_id, after)
        end_at = run.last_event_sequence if run.state.is_terminal else None
        if end_at is not None and after >= end_at:
            return None
        return self._ports.events.subscribe(workspace_id, run_id, after_sequence=after, end_at=end_at)

    async def list_artifacts(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        page: PageRequest[Keyset],
        *,
        artifact_types: Collection[str] | None = None,
    ) -> Page[Artifact, Keyset]:
        """Oldest first; only the ``artifact_types`` given (the ones the caller can show), when given."""
        await self._authorize(principal, workspace_id, Role.VIEWER, "run.artifacts.read", resource_id=run_id)
        async with self._deps.uow(read_only=True) as uow:
            run = await uow.runs.get(workspace_id, run_id)
            return await visible_artifacts(uow, run, page, artifact_types)

    async def download_artifact(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        artifact_id: str,
        range_header: str | None,
        *,
        trace_id: str | None = None,
    ) -> ArtifactDownload:
        """Permission is checked again for every download, and every download is audited."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="artifact.download",
            resource_type=ARTIFACT,
            resource_id=artifact_id,
            trace_id=trace_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            await uow.runs.get(workspace_id, run_id)
        # Opening the content is I/O: outside any transaction. The audit record follows once it opened.
        download = await self._downloads.open_artifact(
            workspace_id, run_id, artifact_id, parse_range_header(range_header)
        )
        part = f" bytes {download.start}-{download.end - 1}" if download.partial else ""
        try:
            async with self._deps.uow() as uow:
                await self._deps.auditor.record(
                    uow,
                    principal,
                    "artifact.download",
                    ARTIFACT,
                    workspace_id=workspace_id,
                    resource_id=artifact_id,
                    summary=f"{download.artifact_type} of run {run_id}{part}",
                    trace_id=trace_id,
                )
        except BaseException:
            close = getattr(download.chunks, "aclose", None)
            if close is not None:
                await close()
            raise
        return download

    @staticmethod
    def list_filter(
        states: Sequence[str] | None,
        job_id: str | None,
        created_after: datetime | None,
        created_before: datetime | None,
    ) -> RunListFilter:
        return RunListFilter(
            states=frozenset(RunState(s) for s in states) if states else None,
            job_id=job_id,
            created_after=created_after,
            created_before=created_before,
        )
