"""Accounts, messages (and revisions), jobs and schedules."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select

from wepush.server.domain import (
    Account,
    DuplicateResource,
    Job,
    Keyset,
    Message,
    MessageRevision,
    NotFound,
    Page,
    PageRequest,
    ResourceReferences,
    Schedule,
    VersionConflict,
)

from . import _references as refs
from ._base import SqlRepository
from ._mapping import RowMapper
from ._repo_live import LiveResources
from ._tables_core import account, job, message, message_revision, schedule

_ACCOUNT = RowMapper(Account, account, renames={"config": "config_json"})
_MESSAGE = RowMapper(Message, message)
_REVISION = RowMapper(MessageRevision, message_revision, renames={"content": "content_json"})
_JOB = RowMapper(Job, job, renames={"policies": "policies_json"})
_SCHEDULE = RowMapper(Schedule, schedule)


class SqlAccountRepository(LiveResources[Account]):
    table = account
    kind = "account"
    mapper = _ACCOUNT

    async def add(self, account_: Account) -> Account:
        return await self._add_row(account_)

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        provider_id: str | None = None,
    ) -> Page[Account, Keyset]:
        by_provider = () if provider_id is None else (account.c.provider_id == provider_id,)
        return await self._live_page(workspace_id, page, *by_provider, name=name)

    async def references(self, workspace_id: str, account_id: str) -> ResourceReferences:
        return await refs.account_references(self._conn, account_id)


class SqlMessageRepository(LiveResources[Message]):
    table = message
    kind = "message"
    mapper = _MESSAGE

    async def add(self, message_: Message, first_revision: MessageRevision) -> Message:
        await self._add_row(message_)
        await self.add_revision(first_revision)
        return message_

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        provider_id: str | None = None,
    ) -> Page[Message, Keyset]:
        by_provider = () if provider_id is None else (message.c.provider_id == provider_id,)
        return await self._live_page(workspace_id, page, *by_provider, name=name)

    async def references(self, workspace_id: str, message_id: str) -> ResourceReferences:
        return await refs.message_references(self._conn, message_id)

    async def add_revision(self, revision: MessageRevision) -> MessageRevision:
        await self._insert(
            message_revision,
            _REVISION.to_values(revision),
            lambda: DuplicateResource(
                "message_revision", f"{revision.message_id} revision {revision.revision}"
            ),
        )
        return revision

    async def get_revision(self, workspace_id: str, message_id: str, revision: int) -> MessageRevision:
        row = await self._one(
            select(message_revision).where(
                message_revision.c.workspace_id == workspace_id,
                message_revision.c.message_id == message_id,
                message_revision.c.revision == revision,
            )
        )
        if row is None:
            raise NotFound("message_revision", f"{message_id}@{revision}")
        return _REVISION.from_row(row)

    async def list_revisions(
        self, workspace_id: str, message_id: str, page: PageRequest[int]
    ) -> Page[MessageRevision, int]:
        return await self._sequence_page(
            select(message_revision).where(
                message_revision.c.workspace_id == workspace_id, message_revision.c.message_id == message_id
            ),
            page,
            position=message_revision.c.revision,
            build=_REVISION.from_row,
            key=lambda r: r.revision,
        )


class SqlJobRepository(LiveResources[Job]):
    table = job
    kind = "job"
    mapper = _JOB

    async def add(self, job_: Job) -> Job:
        return await self._add_row(job_)

    async def references(self, workspace_id: str, job_id: str) -> ResourceReferences:
        return await refs.job_references(self._conn, job_id)


class SqlScheduleRepository(SqlRepository):
    async def add(self, schedule_: Schedule) -> Schedule:
        await self._insert(
            schedule, _SCHEDULE.to_values(schedule_), lambda: DuplicateResource("schedule", schedule_.id)
        )
        return schedule_

    async def get(self, workspace_id: str, schedule_id: str) -> Schedule:
        row = await self._get_row(schedule, "schedule", schedule_id, schedule.c.workspace_id == workspace_id)
        return _SCHEDULE.from_row(row)

    async def list_page(
        self, workspace_id: str, page: PageRequest[Keyset], *, job_id: str | None = None
    ) -> Page[Schedule, Keyset]:
        stmt = select(schedule).where(schedule.c.workspace_id == workspace_id)
        if job_id is not None:
            stmt = stmt.where(schedule.c.job_id == job_id)
        return await self._keyset_page(
            stmt,
            page,
            at=schedule.c.created_at,
            id_=schedule.c.id,
            build=_SCHEDULE.from_row,
            key=lambda entity: Keyset(entity.created_at, entity.id),
        )

    async def update(self, schedule_: Schedule) -> Schedule:
        row = await self._update_versioned(
            schedule,
            "schedule",
            schedule_.id,
            schedule_.version,
            _SCHEDULE.to_values(schedule_),
            schedule.c.workspace_id == schedule_.workspace_id,
        )
        return _SCHEDULE.from_row(row)

    async def delete(self, workspace_id: str, schedule_id: str, expected_version: int) -> None:
        result = await self._conn.execute(
            delete(schedule).where(
                schedule.c.id == schedule_id,
                schedule.c.workspace_id == workspace_id,
                schedule.c.version == expected_version,
            )
        )
        if result.rowcount == 0:
            if await self._exists(schedule.c.id == schedule_id, schedule.c.workspace_id == workspace_id):
                raise VersionConflict("schedule", schedule_id, expected_version)
            raise NotFound("schedule", schedule_id)

    async def due(self, now: datetime, limit: int) -> Sequence[Schedule]:
        stmt = (
            select(schedule)
            .where(schedule.c.enabled.is_(True), schedule.c.next_fire_at <= now)
            .order_by(schedule.c.next_fire_at, schedule.c.id)
            .limit(limit)
        )
        if self._is_postgresql:
            stmt = stmt.with_for_update(skip_locked=True)
        return [_SCHEDULE.from_row(row) for row in await self._all(stmt)]
