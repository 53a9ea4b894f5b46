"""Reference queries behind the "resources used by a Run never disappear" rule."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Table, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from wepush.server.domain import ResourceReferences

from ._tables_audience import audience_snapshot
from ._tables_core import job, schedule
from ._tables_runs import run


async def _count(conn: AsyncConnection, table: Table, *criteria: ColumnElement[bool]) -> int:
    return int(await conn.scalar(select(func.count()).select_from(table).where(*criteria)) or 0)


async def _refs(conn: AsyncConnection, run_criteria: Any, job_criteria: Any) -> ResourceReferences:
    return ResourceReferences(
        runs=await _count(conn, run, run_criteria),
        jobs=await _count(conn, job, job_criteria, job.c.deleted_at.is_(None)),
    )


async def account_references(conn: AsyncConnection, account_id: str) -> ResourceReferences:
    return await _refs(conn, run.c.account_id == account_id, job.c.account_id == account_id)


async def message_references(conn: AsyncConnection, message_id: str) -> ResourceReferences:
    return await _refs(conn, run.c.message_id == message_id, job.c.message_id == message_id)


async def snapshot_references(conn: AsyncConnection, snapshot_id: str) -> ResourceReferences:
    return await _refs(
        conn, run.c.audience_snapshot_id == snapshot_id, job.c.audience_snapshot_id == snapshot_id
    )


async def audience_references(conn: AsyncConnection, audience_id: str) -> ResourceReferences:
    snapshots = select(audience_snapshot.c.id).where(audience_snapshot.c.audience_id == audience_id)
    return await _refs(
        conn, run.c.audience_snapshot_id.in_(snapshots), job.c.audience_snapshot_id.in_(snapshots)
    )


async def job_references(conn: AsyncConnection, job_id: str) -> ResourceReferences:
    return ResourceReferences(
        runs=await _count(conn, run, run.c.job_id == job_id),
        schedules=await _count(conn, schedule, schedule.c.job_id == job_id),
    )
