"""Ports for accounts, messages, jobs and schedules.

Deleting one of these is refused with :class:`ResourceInUse` while :meth:`references` is non-empty; otherwise
the row is soft-deleted (``deleted_at``) so that historic Runs keep pointing at readable rows. Soft-deleted
rows behave as absent (:class:`NotFound`) and free their name. Schedules are hard-deleted: nothing refers
to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from ._paging import Keyset, Page, PageRequest
from ._resources import Account, Job, Message, MessageRevision, ResourceReferences, Schedule


class AccountRepository(Protocol):
    async def add(self, account: Account) -> Account:
        """:class:`NameAlreadyUsed` when a live account of the workspace has the name."""
        ...

    async def get(self, workspace_id: str, account_id: str, *, referencing: bool = False) -> Account:
        """The live account, or :class:`NotFound`. ``referencing``: the caller is about to store a
        reference to it (a job, a run); the row is then held until the transaction ends, so a delete
        that runs at the same time waits and sees the reference (PostgreSQL ``FOR SHARE``)."""
        ...

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        provider_id: str | None = None,
    ) -> Page[Account, Keyset]:
        """Live accounts, newest first by ``(created_at, id)``. A non-empty ``name`` keeps names that
        contain it, ignoring case (Unicode lowercase, the same on every database); ``provider_id`` keeps
        that provider's accounts. Filters apply before the ``limit + 1`` read, so pages are never short."""
        ...

    async def update(self, account: Account) -> Account: ...

    async def references(self, workspace_id: str, account_id: str) -> ResourceReferences:
        """Live jobs and all runs using the account."""
        ...

    async def delete(self, workspace_id: str, account_id: str, expected_version: int) -> None: ...


class MessageRepository(Protocol):
    async def add(self, message: Message, first_revision: MessageRevision) -> Message:
        """Insert the message with its first revision."""
        ...

    async def get(self, workspace_id: str, message_id: str, *, referencing: bool = False) -> Message:
        """The live message, or :class:`NotFound`. ``referencing``: the caller is about to store a
        reference to it (a job, a run); the row is then held until the transaction ends, so a delete
        that runs at the same time waits and sees the reference (PostgreSQL ``FOR SHARE``)."""
        ...

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        provider_id: str | None = None,
    ) -> Page[Message, Keyset]:
        """Live messages, newest first; ``name`` and ``provider_id`` filter as for accounts."""
        ...

    async def update(self, message: Message) -> Message: ...

    async def add_revision(self, revision: MessageRevision) -> MessageRevision:
        """Insert an immutable revision; :class:`DuplicateResource` when the number exists already.

        To add revision ``n + 1``, update the message with ``latest_revision = n + 1`` (optimistic, so
        concurrent editors conflict) and add the revision in the same unit of work.
        """
        ...

    async def get_revision(self, workspace_id: str, message_id: str, revision: int) -> MessageRevision: ...

    async def list_revisions(
        self, workspace_id: str, message_id: str, page: PageRequest[int]
    ) -> Page[MessageRevision, int]:
        """Oldest first; the page position is the revision number."""
        ...

    async def references(self, workspace_id: str, message_id: str) -> ResourceReferences: ...

    async def delete(self, workspace_id: str, message_id: str, expected_version: int) -> None: ...


class JobRepository(Protocol):
    async def add(self, job: Job) -> Job: ...

    async def get(self, workspace_id: str, job_id: str, *, referencing: bool = False) -> Job:
        """The live job, or :class:`NotFound`. ``referencing``: the caller is about to store a
        reference to it (a job, a run); the row is then held until the transaction ends, so a delete
        that runs at the same time waits and sees the reference (PostgreSQL ``FOR SHARE``)."""
        ...

    async def list_page(
        self, workspace_id: str, page: PageRequest[Keyset], *, name: str | None = None
    ) -> Page[Job, Keyset]:
        """Live jobs, newest first; ``name`` filters as for accounts."""
        ...

    async def update(self, job: Job) -> Job: ...

    async def references(self, workspace_id: str, job_id: str) -> ResourceReferences:
        """All runs of the job and its schedules."""
        ...

    async def delete(self, workspace_id: str, job_id: str, expected_version: int) -> None: ...


class ScheduleRepository(Protocol):
    async def add(self, schedule: Schedule) -> Schedule: ...

    async def get(self, workspace_id: str, schedule_id: str) -> Schedule: ...

    async def list_page(
        self, workspace_id: str, page: PageRequest[Keyset], *, job_id: str | None = None
    ) -> Page[Schedule, Keyset]: ...

    async def update(self, schedule: Schedule) -> Schedule: ...

    async def delete(self, workspace_id: str, schedule_id: str, expected_version: int) -> None: ...

    async def due(self, now: datetime, limit: int) -> Sequence[Schedule]:
        """Enabled schedules with ``next_fire_at <= now``, oldest due first, across workspaces.

        On PostgreSQL the rows are locked (``FOR UPDATE SKIP LOCKED``) until the unit of work ends, so
        concurrent scanners never fire the same schedule; the per-fire idempotency key is the backstop.
        """
        ...
