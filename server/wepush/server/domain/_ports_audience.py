"""Ports for audiences, their snapshots and recipients, and imports with their staging rows."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol

from ._audience import (
    AcceptedDigest,
    Audience,
    AudienceImport,
    AudienceSnapshot,
    CommittedImport,
    ImportCounts,
    ImportState,
    Recipient,
    StagedRecord,
    StagedRow,
    StagedRowStatus,
)
from ._paging import Keyset, Page, PageRequest
from ._resources import ResourceReferences


class AudienceRepository(Protocol):
    async def add(self, audience: Audience) -> Audience: ...

    async def get(self, workspace_id: str, audience_id: str, *, referencing: bool = False) -> Audience:
        """The live audience, or :class:`NotFound`. ``referencing``: the caller is about to store a
        reference to it (a job, a run); the row is then held until the transaction ends, so a delete
        that runs at the same time waits and sees the reference (PostgreSQL ``FOR SHARE``)."""
        ...

    async def list_page(
        self, workspace_id: str, page: PageRequest[Keyset], *, name: str | None = None
    ) -> Page[Audience, Keyset]:
        """Live audiences, newest first; a non-empty ``name`` keeps names that contain it, ignoring case."""
        ...

    async def update(self, audience: Audience) -> Audience: ...

    async def references(self, workspace_id: str, audience_id: str) -> ResourceReferences:
        """Live jobs and all runs using any snapshot of the audience."""
        ...

    async def delete(self, workspace_id: str, audience_id: str, expected_version: int) -> None: ...

    async def get_snapshot(
        self, workspace_id: str, snapshot_id: str, *, of_live_audience: bool = False
    ) -> AudienceSnapshot:
        """``of_live_audience``: a snapshot of a deleted audience is not found (what users may still read
        or reference); without it, the snapshot a run was started with is found whatever happened since."""
        ...

    async def list_snapshots(
        self, workspace_id: str, audience_id: str, page: PageRequest[int]
    ) -> Page[AudienceSnapshot, int]:
        """Oldest first; the page position is the snapshot revision."""
        ...

    async def snapshot_references(self, workspace_id: str, snapshot_id: str) -> ResourceReferences:
        """Live jobs and all runs using the snapshot (retention keeps referenced snapshots)."""
        ...

    async def list_recipients(self, snapshot_id: str, page: PageRequest[int]) -> Page[Recipient, int]:
        """Recipients in sequence order; the page position is the last sequence read."""
        ...

    async def recipient_item_keys(self, snapshot_id: str, sequences: Collection[int]) -> dict[int, str]:
        """The item keys of the snapshot's recipients at ``sequences`` (those that exist), by sequence."""
        ...


class AudienceImportRepository(Protocol):
    async def add(self, audience_import: AudienceImport) -> AudienceImport: ...

    async def get(self, workspace_id: str, import_id: str) -> AudienceImport: ...

    async def update(self, audience_import: AudienceImport) -> AudienceImport: ...

    async def list_page(
        self,
        workspace_id: str,
        audience_id: str,
        page: PageRequest[Keyset],
        *,
        now: datetime,
        states: Collection[ImportState] | None = None,
    ) -> Page[AudienceImport, Keyset]:
        """The audience's imports, newest first. ``states`` matches the state an import has at ``now``:
        an open import past its deadline counts as EXPIRED, not as its stored state, since the retention
        sweep may not have marked it yet."""
        ...

    async def staging(self) -> list[AudienceImport]:
        """Every import in STAGING, in any workspace, oldest deadline first: the uploads being received
        now, and any that a stopped instance left behind (few: each is one upload)."""
        ...

    async def renew_receiving(self, import_id: str, until: datetime) -> bool:
        """Move a STAGING import's receiving lease to ``until`` (leaving its version alone: a heartbeat
        is not a change); False when the import is no longer STAGING, e.g. given up as abandoned."""
        ...

    async def fail_lapsed_upload(self, import_id: str, now: datetime, reason: str) -> AudienceImport | None:
        """FAILED (counts cleared, ``reason`` stored) for an import still STAGING whose receiving lease
        ended before ``now``, decided in one statement so a renewal racing it wins or loses cleanly; the
        failed import, or None when it was renewed, moved on or never had a lease."""
        ...

    async def stage_rows(self, import_id: str, rows: Sequence[StagedRow]) -> int:
        """Insert one batch of parsed rows (one ``executemany``). Call once per batch while streaming
        the upload, so the file is never held in memory. Returns the rows inserted."""
        ...

    async def stage_records(self, records: Sequence[StagedRecord]) -> int:
        """:meth:`stage_rows` for rows already in their stored form (the upload's bulk path); every
        record's import id must be the same open import."""
        ...

    async def mark_duplicates(self, import_id: str, *, among: Collection[str] | None = None) -> int:
        """Mark every ACCEPTED row whose ``item_key`` appeared on an earlier ACCEPTED line as DUPLICATE
        (reason code ``DUPLICATE_ITEM_KEY``); returns how many rows were marked. With ``among`` the caller
        vouches that no key outside it occurs twice, so only rows with those keys are ranked."""
        ...

    async def count_staged(self, import_id: str) -> ImportCounts: ...

    async def list_staged(
        self,
        import_id: str,
        page: PageRequest[int],
        *,
        statuses: Collection[StagedRowStatus] | None = None,
    ) -> Page[StagedRow, int]:
        """Rows in line order; the page position is the last line number read."""
        ...

    async def accepted_digest(self, import_id: str) -> AcceptedDigest:
        """The checksum and number of the import's ACCEPTED rows (once its duplicates are marked),
        streamed from the database so memory stays flat for any audience size."""
        ...

    async def commit(
        self,
        audience: Audience,
        audience_import: AudienceImport,
        *,
        digest_from: AudienceImportRepository | None = None,
    ) -> CommittedImport:
        """Turn the ACCEPTED rows of a STAGED import into the audience's next snapshot.

        Recipients are copied with one ``INSERT … SELECT`` from the staging table (sequence = rank in
        line order, from 1), so no row passes through the process. ``audience.version`` and
        ``audience_import.version`` are re-checked (:class:`VersionConflict`); an import that is not
        STAGED raises :class:`ImportStateConflict`.

        ``digest_from``: a repository on another connection (a read-only unit of work) that reads the
        snapshot's :meth:`accepted_digest` while this one copies the recipients, so the two overlap; by
        default the digest is read first, on this connection. A digest whose row count differs from the
        rows copied fails the commit (:class:`ImportStateConflict`) instead of recording a wrong checksum.
        """
        ...

    async def discard_staging(self, import_id: str) -> int:
        """Delete the staging rows of an import (after commit, failure or expiry)."""
        ...

    async def expire_open(self, now: datetime, limit: int) -> int:
        """Mark up to ``limit`` open imports (CREATED, STAGING, STAGED) past their deadline EXPIRED;
        returns how many changed."""
        ...

    async def with_expired_staging(self, now: datetime, limit: int) -> list[str]:
        """Ids of up to ``limit`` imports past their deadline that still have staging rows."""
        ...

    async def discard_staging_rows(self, import_id: str, limit: int) -> int:
        """Delete up to ``limit`` staging rows of an import, first lines first; returns how many."""
        ...
