"""Accounts, messages (and revisions), jobs and schedules."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from sqlalchemy import Table, delete, select

from wepush.server.domain import (
    Account,
    DuplicateResource,
    Job,
    Keyset,
    Message,
    MessageRevision,
    NameAlreadyUsed,
    NotFound,
    Page,
    PageRequest,
    ResourceInUse,
    ResourceReferences,
    Schedule,
    VersionConflict,
)

from . import _references as refs
from ._base import SqlRepository
from ._mapping import RowMapper
from ._tables_core import account, job, message, message_revision, schedule

_ACCOUNT = RowMapper(Account, account, renames={"config": "config_json"})
_MESSAGE = RowMapper(Message, message)
_REVISION = RowMapper(MessageRevision, message_revision, renames={"content": "content_json"})
_JOB = RowMapper(Job, job, renames={"policies": "policies_json"})
_SCHEDULE = RowMapper(Schedule, schedule)


def _created_key(entity: Account | Message | Job | Schedule) -> Keyset:
    return Keyset(entity.created_at, entity.id)


class _SoftDeletable(SqlRepository):
    """Live rows only; deletion is refused while referenced, then marks ``deleted_at``."""

    async def _live_row_or_404(self, table: Table, kind: str, workspace_id: str, resource_id: str) -> object:
        return await self._get_row(
            table, kind, resource_id, table.c.workspace_id == workspace_id, table.c.deleted_at.is_(None)
        )

    async def _soft_delete(
        self,
        table: Table,
        kind: str,
        workspace_id: str,
        resource_id: str,
        expected_version: int,
        references: Callable[[], Awaitable[ResourceReferences]],
    ) -> None:
        await self._live_row_or_404(table, kind, workspace_id, resource_id)
        found = await references()
        if found.any:
            raise ResourceInUse(kind, resource_id, found)
        await self._update_versioned(
            table,
            kind,
            resource_id,
            expected_version,
            {"deleted_at": self._clock()},
            table.c.workspace_id == workspace_id,
            table.c.deleted_at.is_(None),
        )


class SqlAccountRepository(_SoftDeletable):
    async def add(self, account_: Account) -> Account:
        await self._insert(
            account, _ACCOUNT.to_values(account_), lambda: NameAlreadyUsed("account", account_.name)
        )
        return account_

    async def get(self, workspace_id: str, account_id: str) -> Account:
        row = await self._get_row(
            account,
            "account",
            account_id,
            account.c.workspace_id == workspace_id,
            account.c.deleted_at.is_(None),
        )
        return _ACCOUNT.from_row(row)

    async def list_page(self, workspace_id: str, page: PageRequest[Keyset]) -> Page[Account, Keyset]:
        return await self._keyset_page(
            select(account).where(account.c.workspace_id == workspace_id, account.c.deleted_at.is_(None)),
            page,
            at=account.c.created_at,
            id_=account.c.id,
            build=_ACCOUNT.from_row,
            key=_created_key,
        )

    async def update(self, account_: Account) -> Account:
        row = await self._update_versioned(
            account,
            "account",
            account_.id,
            account_.version,
            _ACCOUNT.to_values(account_),
            account.c.workspace_id == account_.workspace_id,
            account.c.deleted_at.is_(None),
            on_duplicate=lambda: NameAlreadyUsed("account", account_.name),
        )
        return _ACCOUNT.from_row(row)

    async def references(self, workspace_id: str, account_id: str) -> ResourceReferences:
        return await refs.account_references(self._conn, account_id)

    async def delete(self, workspace_id: str, account_id: str, expected_version: int) -> None:
        await self._soft_delete(
            account,
            "account",
            workspace_id,
            account_id,
            expected_version,
            lambda: self.references(workspace_id, account_id),
        )


class SqlMessageRepository(_SoftDeletable):
    async def add(self, message_: Message, first_revision: MessageRevision) -> Message:
        await self._insert(
            message, _MESSAGE.to_values(message_), lambda: NameAlreadyUsed("message", message_.name)
        )
        await self.add_revision(first_revision)
        return message_

    async def get(self, workspace_id: str, message_id: str) -> Message:
        row = await self._get_row(
            message,
            "message",
            message_id,
            message.c.workspace_id == workspace_id,
            message.c.deleted_at.is_(None),
        )
        return _MESSAGE.from_row(row)

    async def list_page(self, workspace_id: str, page: PageRequest[Keyset]) -> Page[Message, Keyset]:
        return await self._keyset_page(
            select(message).where(message.c.workspace_id == workspace_id, message.c.deleted_at.is_(None)),
            page,
            at=message.c.created_at,
            id_=message.c.id,
            build=_MESSAGE.from_row,
            key=_created_key,
        )

    async def update(self, message_: Message) -> Message:
        row = await self._update_versioned(
            message,
            "message",
            message_.id,
            message_.version,
            _MESSAGE.to_values(message_),
            message.c.workspace_id == message_.workspace_id,
            message.c.deleted_at.is_(None),
            on_duplicate=lambda: NameAlreadyUsed("message", message_.name),
        )
        return _MESSAGE.from_row(row)

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

    async def references(self, workspace_id: str, message_id: str) -> ResourceReferences:
        return await refs.message_references(self._conn, message_id)

    async def delete(self, workspace_id: str, message_id: str, expected_version: int) -> None:
        await self._soft_delete(
            message,
            "message",
            workspace_id,
            message_id,
            expected_version,
            lambda: self.references(workspace_id, message_id),
        )


class SqlJobRepository(_SoftDeletable):
    async def add(self, job_: Job) -> Job:
        await self._insert(job, _JOB.to_values(job_), lambda: NameAlreadyUsed("job", job_.name))
        return job_

    async def get(self, workspace_id: str, job_id: str) -> Job:
        row = await self._get_row(
            job, "job", job_id, job.c.workspace_id == workspace_id, job.c.deleted_at.is_(None)
        )
        return _JOB.from_row(row)

    async def list_page(self, workspace_id: str, page: PageRequest[Keyset]) -> Page[Job, Keyset]:
        return await self._keyset_page(
            select(job).where(job.c.workspace_id == workspace_id, job.c.deleted_at.is_(None)),
            page,
            at=job.c.created_at,
            id_=job.c.id,
            build=_JOB.from_row,
            key=_created_key,
        )

    async def update(self, job_: Job) -> Job:
        row = await self._update_versioned(
            job,
            "job",
            job_.id,
            job_.version,
            _JOB.to_values(job_),
            job.c.workspace_id == job_.workspace_id,
            job.c.deleted_at.is_(None),
            on_duplicate=lambda: NameAlreadyUsed("job", job_.name),
        )
        return _JOB.from_row(row)

    async def references(self, workspace_id: str, job_id: str) -> ResourceReferences:
        return await refs.job_references(self._conn, job_id)

    async def delete(self, workspace_id: str, job_id: str, expected_version: int) -> None:
        await self._soft_delete(
            job, "job", workspace_id, job_id, expected_version, lambda: self.references(workspace_id, job_id)
        )


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
            key=_created_key,
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
