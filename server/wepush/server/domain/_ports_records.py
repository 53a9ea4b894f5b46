"""Ports for artifacts, audit events and idempotency records."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Protocol

from ._paging import Keyset, Page, PageRequest
from ._records import Artifact, ArtifactOwnerType, ArtifactState, AuditEvent, AuditOutcome, IdempotencyRecord


class ArtifactRepository(Protocol):
    async def add(self, artifact: Artifact) -> Artifact: ...

    async def get(self, workspace_id: str, artifact_id: str) -> Artifact: ...

    async def list_for_owner(
        self, workspace_id: str, owner_type: ArtifactOwnerType, owner_id: str
    ) -> list[Artifact]:
        """Oldest first; DELETED artifacts excluded."""
        ...

    async def list_page(
        self,
        workspace_id: str,
        owner_type: ArtifactOwnerType,
        owner_id: str,
        page: PageRequest[Keyset],
        *,
        states: Collection[ArtifactState],
        artifact_types: Collection[str] | None = None,
        without_replaced_failures: bool = False,
    ) -> Page[Artifact, Keyset]:
        """The owner's artifacts in one of ``states`` (and of one of ``artifact_types`` when given), oldest
        first by ``(created_at, id)``; the filters apply before the ``limit + 1`` read.
        ``without_replaced_failures`` leaves out the FAILED artifacts another artifact of the same owner
        and type replaced: one UPLOADING or READY, or one created after it (and expired since)."""
        ...

    async def update(self, artifact: Artifact) -> Artifact:
        """Optimistic update (pin, legal hold, expiry, state)."""
        ...

    async def mark_ready(
        self, workspace_id: str, artifact_id: str, *, expected_version: int, size_bytes: int, sha256: str
    ) -> Artifact:
        """UPLOADING → READY after the content was verified; :class:`VersionConflict` otherwise."""
        ...

    async def claim_expired(self, now: datetime, limit: int) -> list[Artifact]:
        """READY artifacts past ``expires_at`` that are neither pinned nor on legal hold become DELETING
        (the store deletion happens after commit, outside any transaction)."""
        ...

    async def mark_deleted(self, artifact_id: str) -> Artifact:
        """DELETING → DELETED; idempotent."""
        ...

    async def keys_being_written(self) -> frozenset[str]:
        """Storage keys of UPLOADING artifacts whose run has not finished: someone (perhaps another
        Service instance, perhaps a run paused for days) still writes them, however long ago the last
        byte came."""
        ...

    async def list_unreplaced_failures(
        self, artifact_types: Collection[str], now: datetime, page: PageRequest[Keyset]
    ) -> Page[Artifact, Keyset]:
        """FAILED run artifacts of ``artifact_types`` whose run has ended, that have not expired by ``now``
        and that nothing replaced (as ``without_replaced_failures`` of :meth:`list_page` tells), oldest
        first by ``(created_at, id)``: files a finished run lost and nobody wrote again."""
        ...

    async def list_deleting(self, limit: int) -> list[Artifact]:
        """DELETING artifacts, oldest change first: deletions a cleanup pass started but has not confirmed
        (the store deletion failed or the process stopped), so the next pass can finish them."""
        ...


class AuditRepository(Protocol):
    async def append(self, event: AuditEvent) -> AuditEvent: ...

    async def list_page(
        self,
        workspace_id: str | None,
        page: PageRequest[Keyset],
        *,
        action: str | None = None,
        actor_id: str | None = None,
        resource_type: str | None = None,
        resource_id: str | None = None,
        outcome: AuditOutcome | None = None,
        since: datetime | None = None,
        occurred_after: datetime | None = None,
        until: datetime | None = None,
    ) -> Page[AuditEvent, Keyset]:
        """Newest first by ``(occurred_at, id)``; ``since`` inclusive, ``occurred_after`` and ``until``
        exclusive. Every filter applies before the ``limit + 1`` read. ``workspace_id`` None: the events
        recorded outside any workspace."""
        ...


class IdempotencyRepository(Protocol):
    async def find(self, scope: str, key_hash: str, now: datetime) -> IdempotencyRecord | None:
        """The live record for the key; expired records count as absent."""
        ...

    async def save(self, record: IdempotencyRecord) -> IdempotencyRecord:
        """Store the outcome. An expired record with the same key is replaced; a live one raises
        :class:`IdempotencyConflict` (a concurrent request with the same key won)."""
        ...

    async def purge_expired(self, now: datetime, limit: int) -> int: ...
