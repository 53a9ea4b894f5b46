"""Artifacts, audit events and idempotency records."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, exists, or_, select, update

from wepush.server.domain import (
    TERMINAL_RUN_STATES,
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    AuditEvent,
    AuditOutcome,
    DuplicateResource,
    IdempotencyConflict,
    IdempotencyRecord,
    Keyset,
    Page,
    PageRequest,
)

from ._base import SqlRepository
from ._mapping import RowMapper
from ._tables_records import artifact, audit_event, idempotency_record
from ._tables_runs import run

_ARTIFACT = RowMapper(Artifact, artifact)
_AUDIT = RowMapper(AuditEvent, audit_event, renames={"details": "details_json"})
_IDEMPOTENCY = RowMapper(
    IdempotencyRecord, idempotency_record, renames={"response_body": "response_body_json"}
)


class SqlArtifactRepository(SqlRepository):
    async def add(self, artifact_: Artifact) -> Artifact:
        await self._insert(
            artifact, _ARTIFACT.to_values(artifact_), lambda: DuplicateResource("artifact", artifact_.id)
        )
        return artifact_

    async def get(self, workspace_id: str, artifact_id: str) -> Artifact:
        row = await self._get_row(artifact, "artifact", artifact_id, artifact.c.workspace_id == workspace_id)
        return _ARTIFACT.from_row(row)

    async def list_for_owner(
        self, workspace_id: str, owner_type: ArtifactOwnerType, owner_id: str
    ) -> list[Artifact]:
        rows = await self._all(
            select(artifact)
            .where(
                artifact.c.workspace_id == workspace_id,
                artifact.c.owner_type == owner_type.value,
                artifact.c.owner_id == owner_id,
                artifact.c.state != ArtifactState.DELETED.value,
            )
            .order_by(artifact.c.created_at, artifact.c.id)
        )
        return [_ARTIFACT.from_row(row) for row in rows]

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
        stmt = select(artifact).where(
            artifact.c.workspace_id == workspace_id,
            artifact.c.owner_type == owner_type.value,
            artifact.c.owner_id == owner_id,
            artifact.c.state.in_(sorted(state.value for state in states)),
        )
        if artifact_types is not None:
            stmt = stmt.where(artifact.c.artifact_type.in_(sorted(artifact_types)))
        if without_replaced_failures:
            stmt = stmt.where(or_(artifact.c.state != ArtifactState.FAILED.value, ~_replaced()))
        return await self._oldest_first(stmt, page)

    async def update(self, artifact_: Artifact) -> Artifact:
        row = await self._update_versioned(
            artifact,
            "artifact",
            artifact_.id,
            artifact_.version,
            _ARTIFACT.to_values(artifact_),
            artifact.c.workspace_id == artifact_.workspace_id,
        )
        return _ARTIFACT.from_row(row)

    async def mark_ready(
        self, workspace_id: str, artifact_id: str, *, expected_version: int, size_bytes: int, sha256: str
    ) -> Artifact:
        row = await self._update_versioned(
            artifact,
            "artifact",
            artifact_id,
            expected_version,
            {"state": ArtifactState.READY.value, "size_bytes": size_bytes, "sha256": sha256},
            artifact.c.workspace_id == workspace_id,
            require=[artifact.c.state == ArtifactState.UPLOADING.value],
        )
        return _ARTIFACT.from_row(row)

    async def claim_expired(self, now: datetime, limit: int) -> list[Artifact]:
        due = (
            select(artifact.c.id)
            .where(
                artifact.c.state == ArtifactState.READY.value,
                artifact.c.expires_at <= now,
                artifact.c.pinned.is_(False),
                artifact.c.legal_hold.is_(False),
            )
            .order_by(artifact.c.expires_at, artifact.c.id)
            .limit(limit)
        )
        if self._is_postgresql:
            due = due.with_for_update(skip_locked=True)
        ids = list((await self._conn.scalars(due)).all())
        if not ids:
            return []
        rows = await self._all(
            update(artifact)
            .where(artifact.c.id.in_(ids), artifact.c.state == ArtifactState.READY.value)
            .values(
                state=ArtifactState.DELETING.value, updated_at=self._clock(), version=artifact.c.version + 1
            )
            .returning(*artifact.c)
        )
        return sorted((_ARTIFACT.from_row(row) for row in rows), key=lambda a: (a.created_at, a.id))

    async def mark_deleted(self, artifact_id: str) -> Artifact:
        row = await self._one(
            update(artifact)
            .where(artifact.c.id == artifact_id, artifact.c.state == ArtifactState.DELETING.value)
            .values(
                state=ArtifactState.DELETED.value, updated_at=self._clock(), version=artifact.c.version + 1
            )
            .returning(*artifact.c)
        )
        if row is None:
            row = await self._get_row(artifact, "artifact", artifact_id)
        return _ARTIFACT.from_row(row)

    async def keys_being_written(self) -> frozenset[str]:
        live_runs = select(run.c.id).where(run.c.state.not_in([s.value for s in TERMINAL_RUN_STATES]))
        rows = await self._all(
            select(artifact.c.storage_key).where(
                artifact.c.state == ArtifactState.UPLOADING.value,
                artifact.c.owner_type == ArtifactOwnerType.RUN.value,
                artifact.c.owner_id.in_(live_runs),
            )
        )
        return frozenset(str(row["storage_key"]) for row in rows)

    async def list_unreplaced_failures(
        self, artifact_types: Collection[str], now: datetime, page: PageRequest[Keyset]
    ) -> Page[Artifact, Keyset]:
        ended = select(run.c.id).where(run.c.state.in_([s.value for s in TERMINAL_RUN_STATES]))
        stmt = select(artifact).where(
            artifact.c.state == ArtifactState.FAILED.value,
            artifact.c.owner_type == ArtifactOwnerType.RUN.value,
            artifact.c.artifact_type.in_(sorted(artifact_types)),
            or_(artifact.c.expires_at.is_(None), artifact.c.expires_at > now),
            artifact.c.owner_id.in_(ended),
            ~_replaced(),
        )
        return await self._oldest_first(stmt, page)

    async def _oldest_first(self, stmt: Select[Any], page: PageRequest[Keyset]) -> Page[Artifact, Keyset]:
        return await self._keyset_page(
            stmt,
            page,
            at=artifact.c.created_at,
            id_=artifact.c.id,
            build=_ARTIFACT.from_row,
            key=lambda a: Keyset(a.created_at, a.id),
            descending=False,
        )

    async def list_deleting(self, limit: int) -> list[Artifact]:
        rows = await self._all(
            select(artifact)
            .where(artifact.c.state == ArtifactState.DELETING.value)
            .order_by(artifact.c.updated_at, artifact.c.id)
            .limit(limit)
        )
        return [_ARTIFACT.from_row(row) for row in rows]


def _replaced() -> ColumnElement[bool]:
    """Another artifact of the same owner and type stands for the ``artifact`` row: one UPLOADING or READY,
    or one created after it (expired since). One that was deleted before does not: a file written again
    after the READY one was removed to make way for it (a recovery) and then failed is still lost."""
    other = artifact.alias("replacement")
    later = or_(
        other.c.created_at > artifact.c.created_at,
        and_(other.c.created_at == artifact.c.created_at, other.c.id > artifact.c.id),
    )
    return exists().where(
        other.c.workspace_id == artifact.c.workspace_id,
        other.c.owner_type == artifact.c.owner_type,
        other.c.owner_id == artifact.c.owner_id,
        other.c.artifact_type == artifact.c.artifact_type,
        or_(
            other.c.state.in_([ArtifactState.UPLOADING.value, ArtifactState.READY.value]),
            and_(other.c.state.in_([ArtifactState.DELETING.value, ArtifactState.DELETED.value]), later),
        ),
    )


class SqlAuditRepository(SqlRepository):
    async def append(self, event: AuditEvent) -> AuditEvent:
        values = _AUDIT.to_values(event) | {"updated_at": event.created_at, "version": 1}
        await self._insert(audit_event, values, lambda: DuplicateResource("audit_event", event.id))
        return event

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
        a = audit_event
        stmt = select(a).where(
            a.c.workspace_id.is_(None) if workspace_id is None else a.c.workspace_id == workspace_id
        )
        if action is not None:
            stmt = stmt.where(a.c.action == action)
        if actor_id is not None:
            stmt = stmt.where(a.c.actor_id == actor_id)
        if resource_type is not None:
            stmt = stmt.where(a.c.resource_type == resource_type)
        if resource_id is not None:
            stmt = stmt.where(a.c.resource_id == resource_id)
        if outcome is not None:
            stmt = stmt.where(a.c.outcome == outcome.value)
        if since is not None:
            stmt = stmt.where(a.c.occurred_at >= since)
        if occurred_after is not None:
            stmt = stmt.where(a.c.occurred_at > occurred_after)
        if until is not None:
            stmt = stmt.where(a.c.occurred_at < until)
        return await self._keyset_page(
            stmt,
            page,
            at=a.c.occurred_at,
            id_=a.c.id,
            build=_AUDIT.from_row,
            key=lambda e: Keyset(e.occurred_at, e.id),
        )


class SqlIdempotencyRepository(SqlRepository):
    async def find(self, scope: str, key_hash: str, now: datetime) -> IdempotencyRecord | None:
        i = idempotency_record
        row = await self._one(
            select(i).where(i.c.scope == scope, i.c.key_hash == key_hash, i.c.expires_at > now)
        )
        return None if row is None else _IDEMPOTENCY.from_row(row)

    async def save(self, record: IdempotencyRecord) -> IdempotencyRecord:
        i = idempotency_record
        # An expired record no longer protects anything; its key may be reused.
        await self._conn.execute(
            delete(i).where(
                i.c.scope == record.scope, i.c.key_hash == record.key_hash, i.c.expires_at <= self._clock()
            )
        )
        await self._insert(i, _IDEMPOTENCY.to_values(record), lambda: IdempotencyConflict(record.scope))
        return record

    async def purge_expired(self, now: datetime, limit: int) -> int:
        i = idempotency_record
        doomed = select(i.c.id).where(i.c.expires_at <= now).order_by(i.c.expires_at).limit(limit)
        result = await self._conn.execute(delete(i).where(i.c.id.in_(doomed)))
        return int(result.rowcount)


__all__ = ["SqlArtifactRepository", "SqlAuditRepository", "SqlIdempotencyRepository"]
