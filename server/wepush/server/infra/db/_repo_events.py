"""Run events (per-run sequence allocation) and run commands."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wepush.server.domain import (
    Clock,
    DuplicateResource,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    RunCommand,
    RunCommandState,
    RunEvent,
    RunEventDraft,
)

from ._base import SqlRepository
from ._mapping import RowMapper
from ._tables_runs import run, run_command, run_event

_EVENT = RowMapper(RunEvent, run_event, renames={"data": "data_json"})
_COMMAND = RowMapper(RunCommand, run_command, renames={"payload": "payload_json"})


async def append_run_events(
    conn: AsyncConnection, clock: Clock, workspace_id: str, run_id: str, drafts: Sequence[RunEventDraft]
) -> list[RunEvent]:
    """Reserve ``len(drafts)`` sequences with one atomic increment of ``run.last_event_sequence`` (which
    also row-locks the run on PostgreSQL until commit), then insert the events in one batch."""
    if not drafts:
        return []
    last = await conn.scalar(
        update(run)
        .where(run.c.id == run_id, run.c.workspace_id == workspace_id)
        .values(last_event_sequence=run.c.last_event_sequence + len(drafts))
        .returning(run.c.last_event_sequence)
    )
    if last is None:
        raise NotFound("run", run_id)
    now = clock()
    first = int(last) - len(drafts) + 1
    events = [
        RunEvent(
            workspace_id=workspace_id,
            run_id=run_id,
            sequence=first + offset,
            type=draft.type,
            occurred_at=draft.occurred_at,
            data=draft.data,
            created_at=now,
        )
        for offset, draft in enumerate(drafts)
    ]
    await conn.execute(
        insert(run_event), [_EVENT.to_values(e) | {"updated_at": now, "version": 1} for e in events]
    )
    return events


class SqlRunEventRepository(SqlRepository):
    async def append(self, workspace_id: str, run_id: str, events: Sequence[RunEventDraft]) -> list[RunEvent]:
        return await append_run_events(self._conn, self._clock, workspace_id, run_id, events)

    async def list_page(self, run_id: str, page: PageRequest[int]) -> Page[RunEvent, int]:
        return await self._sequence_page(
            select(run_event).where(run_event.c.run_id == run_id),
            page,
            position=run_event.c.sequence,
            build=_EVENT.from_row,
            key=lambda e: e.sequence,
        )

    async def first_sequence(self, run_id: str) -> int | None:
        value = await self._conn.scalar(
            select(func.min(run_event.c.sequence)).where(run_event.c.run_id == run_id)
        )
        return None if value is None else int(value)

    async def latest(self, run_id: str, event_type: str) -> RunEvent | None:
        rows = await self._all(
            select(run_event)
            .where(run_event.c.run_id == run_id, run_event.c.type == event_type)
            .order_by(run_event.c.sequence.desc())
            .limit(1)
        )
        return _EVENT.from_row(rows[0]) if rows else None

    async def purge_before(self, cutoff: datetime, limit: int) -> int:
        doomed = (
            select(run_event.c.id)
            .where(run_event.c.occurred_at < cutoff)
            .order_by(run_event.c.occurred_at)
            .limit(limit)
        )
        result = await self._conn.execute(delete(run_event).where(run_event.c.id.in_(doomed)))
        return int(result.rowcount)


class SqlRunCommandRepository(SqlRepository):
    async def add(self, command: RunCommand) -> RunCommand:
        await self._insert(
            run_command,
            _COMMAND.to_values(command),
            lambda: DuplicateResource("run_command", f"command id {command.command_id}"),
        )
        return command

    async def get_by_command_id(self, command_id: str) -> RunCommand | None:
        row = await self._one(select(run_command).where(run_command.c.command_id == command_id))
        return None if row is None else _COMMAND.from_row(row)

    async def list_for_run(self, run_id: str, page: PageRequest[Keyset]) -> Page[RunCommand, Keyset]:
        return await self._keyset_page(
            select(run_command).where(run_command.c.run_id == run_id),
            page,
            at=run_command.c.created_at,
            id_=run_command.c.id,
            build=_COMMAND.from_row,
            key=lambda c: Keyset(c.created_at, c.id),
            descending=False,
        )

    async def mark_delivered(self, command_id: str, *, agent_sequence: int) -> RunCommand:
        return await self._advance(
            command_id,
            (RunCommandState.ACCEPTED,),
            state=RunCommandState.DELIVERED.value,
            agent_sequence=agent_sequence,
        )

    async def record_ack(self, command_id: str, *, applied: bool, result_message: str | None) -> RunCommand:
        final = RunCommandState.APPLIED if applied else RunCommandState.REJECTED
        return await self._advance(
            command_id,
            (RunCommandState.ACCEPTED, RunCommandState.DELIVERED),
            state=final.value,
            result_message=result_message,
            acknowledged_at=self._clock(),
        )

    async def _advance(
        self, command_id: str, sources: Sequence[RunCommandState], **values: object
    ) -> RunCommand:
        """Conditional state step; a command already past ``sources`` is returned unchanged (idempotent)."""
        row = await self._one(
            update(run_command)
            .where(
                run_command.c.command_id == command_id, run_command.c.state.in_([s.value for s in sources])
            )
            .values(**values, updated_at=self._clock(), version=run_command.c.version + 1)
            .returning(*run_command.c)
        )
        if row is None:
            row = await self._one(select(run_command).where(run_command.c.command_id == command_id))
            if row is None:
                raise NotFound("run_command", command_id)
        return _COMMAND.from_row(row)
