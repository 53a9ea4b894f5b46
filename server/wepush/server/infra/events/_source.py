"""Where the broker reads committed run events from: the ``run_event`` table, one short read each."""

from __future__ import annotations

from typing import Protocol

from wepush.server.domain import NotFound, PageRequest, RunEvent, UnitOfWorkFactory


class RunEventSource(Protocol):
    async def events_after(self, run_id: str, sequence: int, limit: int) -> list[RunEvent]:
        """Up to ``limit`` events of ``run_id`` with a sequence above ``sequence``, in order."""
        ...

    async def head(self, workspace_id: str, run_id: str) -> int:
        """The run's last allocated event sequence (0 when it has none or does not exist)."""
        ...


class StoredRunEvents:
    """:class:`RunEventSource` over the unit of work: read-only transactions, never held open."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def events_after(self, run_id: str, sequence: int, limit: int) -> list[RunEvent]:
        async with self._uow(read_only=True) as uow:
            page = await uow.run_events.list_page(run_id, PageRequest(limit=limit, after=sequence))
        return page.items

    async def head(self, workspace_id: str, run_id: str) -> int:
        try:
            async with self._uow(read_only=True) as uow:
                run = await uow.runs.get(workspace_id, run_id)
        except NotFound:
            return 0
        return run.last_event_sequence
