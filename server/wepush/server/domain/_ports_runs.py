"""Ports for runs, run items (and resend sets), run events and run commands."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from ._audience import Recipient
from ._paging import Keyset, Page, PageRequest
from ._run import (
    ItemResult,
    ItemState,
    RetryItem,
    Run,
    RunCommand,
    RunCounts,
    RunEvent,
    RunEventDraft,
    RunItem,
)
from ._run_state import RunState


class RunRepository(Protocol):
    async def add(self, run: Run) -> Run:
        """Insert a run; :class:`DuplicateResource` when ``idempotency_key_hash`` is already used in
        the workspace (a schedule fire or an API retry that raced)."""
        ...

    async def get(self, workspace_id: str, run_id: str, *, referencing: bool = False) -> Run:
        """``referencing``: the caller is about to store something that depends on the run's current
        state (a command); the row is held until the transaction ends (PostgreSQL ``FOR SHARE``), so a
        run finishing at the same time either waits and then answers the command, or is seen finished."""
        ...

    async def find_by_idempotency_key(self, workspace_id: str, key_hash: str) -> Run | None: ...

    async def find_by_confirmation(self, workspace_id: str, digest: str) -> Run | None:
        """The run a confirmation token (by its SHA-256 digest) already started, if any."""
        ...

    async def list_page(
        self,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        states: Collection[RunState] | None = None,
        job_id: str | None = None,
    ) -> Page[Run, Keyset]:
        """Newest first by ``(created_at, id)``."""
        ...

    async def scan(self, states: Collection[RunState], page: PageRequest[Keyset]) -> Page[Run, Keyset]:
        """Runs in ``states`` across workspaces, oldest first: bounded recovery scans."""
        ...

    async def transition(
        self,
        workspace_id: str,
        run_id: str,
        *,
        expected_version: int,
        target: RunState,
        reason: str | None = None,
    ) -> Run:
        """Move the run to ``target`` with one conditional update
        (``WHERE id = ? AND state IN (sources of target) AND version = ?``).

        :class:`RunStateConflict` (naming the current state) when the current state cannot reach
        ``target``; :class:`VersionConflict` when only the version differs. Entering RUNNING sets
        ``started_at`` once; entering a terminal state sets ``ended_at``.
        """
        ...

    async def record_progress(
        self, workspace_id: str, run_id: str, *, counts: RunCounts, current_concurrency: int
    ) -> Run:
        """Store counters reported by the executing agent. Counters are telemetry, not editable state,
        so this neither checks nor bumps ``version``; it is refused (:class:`RunStateConflict`) once the
        run is terminal."""
        ...

    async def mark_dispatched(self, workspace_id: str, run_id: str, *, through_sequence: int) -> int:
        """Raise the run's dispatch high-water mark to ``through_sequence`` before that batch of
        recipients reaches the engine; the mark never goes down. Returns the stored mark. Like progress
        it is telemetry of the executing side (no ``version`` bump) and refused
        (:class:`RunStateConflict`) once the run is terminal."""
        ...

    async def dispatch_mark(self, workspace_id: str, run_id: str) -> int:
        """The dispatch high-water mark (0 when nothing was dispatched); :class:`NotFound` if absent."""
        ...


class RunItemRepository(Protocol):
    async def record_results(self, workspace_id: str, run_id: str, results: Sequence[ItemResult]) -> int:
        """Upsert item outcomes keyed by (run_id, item_id). The same item and attempt reported twice is
        a no-op; a higher attempt replaces the outcome; a lower one is ignored. Returns rows written."""
        ...

    async def get(self, run_id: str, item_id: str) -> RunItem | None: ...

    async def list_page(
        self, run_id: str, page: PageRequest[int], *, states: Collection[ItemState] | None = None
    ) -> Page[RunItem, int]:
        """Items in sequence order; the page position is the last sequence read."""
        ...

    async def count_by_state(self, run_id: str) -> dict[ItemState, int]: ...

    async def create_retry_set(self, run_id: str, source_run_id: str, states: Collection[ItemState]) -> int:
        """Limit resend run ``run_id`` to the items of ``source_run_id`` in ``states`` with one
        ``INSERT … SELECT``; returns the number of items."""
        ...

    async def list_retry_items(self, run_id: str, page: PageRequest[int]) -> Page[RetryItem, int]: ...

    async def list_retry_recipients(
        self, run_id: str, snapshot_id: str, page: PageRequest[int]
    ) -> Page[Recipient, int]:
        """The recipients of ``snapshot_id`` a resend run is limited to (its ``run_retry_item`` set), in
        sequence order; the page position is the last sequence read."""
        ...


class RunEventRepository(Protocol):
    async def append(self, workspace_id: str, run_id: str, events: Sequence[RunEventDraft]) -> list[RunEvent]:
        """Append events with the run's next sequences, allocated atomically from
        ``run.last_event_sequence``; ``UNIQUE(run_id, sequence)`` makes any double allocation fail."""
        ...

    async def list_page(self, run_id: str, page: PageRequest[int]) -> Page[RunEvent, int]:
        """Events after ``page.after`` (the SSE Last-Event-ID) in sequence order."""
        ...

    async def first_sequence(self, run_id: str) -> int | None:
        """Oldest retained sequence: a cursor older than this has expired."""
        ...

    async def latest(self, run_id: str, event_type: str) -> RunEvent | None:
        """The run's most recent event of ``event_type``, if one is retained."""
        ...

    async def purge_before(self, cutoff: datetime, limit: int) -> int:
        """Delete up to ``limit`` events that occurred before ``cutoff`` (retention)."""
        ...


class RunCommandRepository(Protocol):
    async def add(self, command: RunCommand) -> RunCommand:
        """:class:`DuplicateResource` when ``command_id`` exists (look it up first to be idempotent)."""
        ...

    async def get_by_command_id(self, command_id: str) -> RunCommand | None: ...

    async def list_for_run(self, run_id: str, page: PageRequest[Keyset]) -> Page[RunCommand, Keyset]:
        """Oldest first."""
        ...

    async def mark_delivered(self, command_id: str, *, agent_sequence: int) -> RunCommand:
        """ACCEPTED → DELIVERED; already delivered or acknowledged commands are returned unchanged."""
        ...

    async def record_ack(self, command_id: str, *, applied: bool, result_message: str | None) -> RunCommand:
        """ACCEPTED/DELIVERED → APPLIED or REJECTED; the first acknowledgement wins, repeats are no-ops."""
        ...
