"""Audiences, snapshots, recipients; imports with their staging rows and the snapshot commit."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    String,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Select

from wepush.server.domain import (
    AcceptedDigest,
    Audience,
    AudienceImport,
    AudienceImportRepository,
    AudienceSnapshot,
    CommittedImport,
    ImportCounts,
    ImportState,
    ImportStateConflict,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    Recipient,
    ResourceReferences,
    StagedRecord,
    StagedRow,
    StagedRowStatus,
    VersionConflict,
    new_id,
    staged_record,
)

from . import _references as refs
from ._base import SqlRepository
from ._copy_text import CopyTextDecoder
from ._mapping import RowMapper
from ._metadata import ID_LENGTH
from ._repo_live import LiveResources
from ._tables_audience import (
    STAGED_ERRORS_PREDICATE,
    audience,
    audience_import,
    audience_import_row,
    audience_recipient,
    audience_snapshot,
)

_AUDIENCE = RowMapper(Audience, audience)
_SNAPSHOT = RowMapper(AudienceSnapshot, audience_snapshot, renames={"fields": "fields_json"})
_RECIPIENT = RowMapper(Recipient, audience_recipient, renames={"fields": "fields_json"})
_IMPORT = RowMapper(
    AudienceImport,
    audience_import,
    renames={"options": "options_json", "columns": "columns_json"},
    composites=("counts",),
)
_STAGED = RowMapper(StagedRow, audience_import_row, renames={"fields": "fields_json"})

DUPLICATE_ITEM_KEY = "DUPLICATE_ITEM_KEY"
_ERROR_STATUSES = frozenset({StagedRowStatus.REJECTED, StagedRowStatus.DUPLICATE})
_OPEN_STATES = (ImportState.CREATED, ImportState.STAGING, ImportState.STAGED)
_COUNT_COLUMNS = ("total_rows", "accepted_rows", "rejected_rows", "duplicate_rows")

_STAGED_COLUMNS = tuple(audience_import_row.c.keys())
# One batch of staging records as a JSON array of arrays, unpacked by SQLite in ``_STAGED_COLUMNS`` order.
# Compiled once; the rows are its one bound parameter.
_BATCH = func.json_each(bindparam("rows")).table_valued("value")
_STAGE_SQLITE = str(
    insert(audience_import_row)
    .from_select(
        list(_STAGED_COLUMNS),
        select(*(_BATCH.c.value.op("->>")(literal_column(str(i))) for i in range(len(_STAGED_COLUMNS)))),
    )
    .compile(dialect=sqlite.dialect())
)
_ACCEPTED_BATCH = func.json_each(bindparam("rows")).table_valued("value")
_STAGE_ACCEPTED_SQLITE = str(
    insert(audience_import_row)
    .from_select(
        list(_STAGED_COLUMNS),
        select(
            bindparam("import_id", type_=String()),
            _ACCEPTED_BATCH.c.value.op("->>")(literal_column("0")),
            _ACCEPTED_BATCH.c.value.op("->>")(literal_column("1")),
            _ACCEPTED_BATCH.c.value.op("->>")(literal_column("2")),
            bindparam("status", type_=String()),
            null(),
            null(),
            null(),
        ),
    )
    .compile(dialect=sqlite.dialect())
)


def _sqlite_host_parameters() -> int:
    """SQLITE_LIMIT_VARIABLE_NUMBER of the SQLite library this process links (the driver's too)."""
    probe = sqlite3.connect(":memory:")
    try:
        return probe.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    finally:
        probe.close()


#: Accepted rows bound as ``(line, key, fields)`` triples in one ``VALUES`` list: SQLite takes bound
#: values as they are, where a JSON batch is parsed once whole and again for each row. In the Service a
#: million rows staged 20 % faster this way, with 500 or 1,000 rows per statement; 2,000 and 10,000 were
#: slower (a large statement costs more to run than it saves in statements). Only whole statements of
#: this size are used and the rest of a batch goes as JSON, so a connection caches one such statement
#: (about 0.36 MiB compiled). Within the host-parameter limit of the SQLite library in use (32,766 by
#: default since 3.32, 999 before), with two parameters besides the rows.
_SQLITE_VALUES_ROWS: Final = min(1000, (_sqlite_host_parameters() - 2) // 3)
# Placeholders only: no value is ever written into the statement's text.
_STAGE_VALUES_SQLITE: Final = (
    "INSERT INTO audience_import_row (import_id, line_number, item_key, fields_json, status) "  # noqa: S608
    "SELECT ?, column1, column2, column3, ? FROM (VALUES "
    + ",".join(("(?,?,?)",) * _SQLITE_VALUES_ROWS)
    + ")"
)
_batch_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CHECKSUM_CHUNK = 5000
_log = logging.getLogger("wepush.server.imports")
#: Sort memory for one import's duplicate ranking on PostgreSQL (transaction-local).
_SORT_MEMORY = "64MB"
#: How long an upload waits for the lock ANALYZE needs before it goes on without fresh statistics.
_ANALYZE_LOCK_WAIT = "200ms"
#: PostgreSQL's lock_not_available (a lock_timeout expired).
_LOCK_NOT_AVAILABLE = "55P03"
# ``item_key TAB fields LF`` per accepted row, in each driver's own dialect and parameter style.
_ACCEPTED_LINES_SQLITE = (
    "SELECT item_key || char(9) || fields_json || char(10) FROM audience_import_row "
    "WHERE import_id = ? AND status = ? ORDER BY line_number"
)
# COPY's text format separates the two columns with a tab and ends each row with a newline.
_ACCEPTED_ROWS_PG = (
    "SELECT item_key, fields_json FROM audience_import_row "
    "WHERE import_id = $1 AND status = $2 ORDER BY line_number"
)
_STAGED_ERRORS = text(STAGED_ERRORS_PREDICATE)


def _in_effective_states(states: Collection[ImportState], now: datetime) -> ColumnElement[bool]:
    """The imports whose state at ``now`` is one of ``states``: an open state only before the deadline,
    EXPIRED also for an open import past it (the retention sweep marks those later)."""
    open_ = [s.value for s in _OPEN_STATES]
    wanted = {s.value for s in states}
    current = [
        and_(audience_import.c.state.in_(sorted(wanted & set(open_))), audience_import.c.expires_at > now),
        audience_import.c.state.in_(sorted(wanted - set(open_))),
    ]
    if ImportState.EXPIRED.value in wanted:
        current.append(and_(audience_import.c.state.in_(open_), audience_import.c.expires_at <= now))
    return or_(*current)


class SqlAudienceRepository(LiveResources[Audience]):
    table = audience
    kind = "audience"
    mapper = _AUDIENCE

    async def add(self, audience_: Audience) -> Audience:
        return await self._add_row(audience_)

    async def references(self, workspace_id: str, audience_id: str) -> ResourceReferences:
        return await refs.audience_references(self._conn, audience_id)

    async def get_snapshot(
        self, workspace_id: str, snapshot_id: str, *, of_live_audience: bool = False
    ) -> AudienceSnapshot:
        live = (
            (
                select(audience.c.id)
                .where(audience.c.id == audience_snapshot.c.audience_id, audience.c.deleted_at.is_(None))
                .exists(),
            )
            if of_live_audience
            else ()
        )
        row = await self._get_row(
            audience_snapshot,
            "audience_snapshot",
            snapshot_id,
            audience_snapshot.c.workspace_id == workspace_id,
            *live,
        )
        return _SNAPSHOT.from_row(row)

    async def list_snapshots(
        self, workspace_id: str, audience_id: str, page: PageRequest[int]
    ) -> Page[AudienceSnapshot, int]:
        return await self._sequence_page(
            select(audience_snapshot).where(
                audience_snapshot.c.workspace_id == workspace_id,
                audience_snapshot.c.audience_id == audience_id,
            ),
            page,
            position=audience_snapshot.c.revision,
            build=_SNAPSHOT.from_row,
            key=lambda s: s.revision,
        )

    async def snapshot_references(self, workspace_id: str, snapshot_id: str) -> ResourceReferences:
        return await refs.snapshot_references(self._conn, snapshot_id)

    async def recipient_item_keys(self, snapshot_id: str, sequences: Collection[int]) -> dict[int, str]:
        if not sequences:
            return {}
        rows = await self._all(
            select(audience_recipient.c.sequence, audience_recipient.c.item_key).where(
                audience_recipient.c.snapshot_id == snapshot_id,
                audience_recipient.c.sequence.in_(sorted(set(sequences))),
            )
        )
        return {int(row["sequence"]): str(row["item_key"]) for row in rows}

    async def list_recipients(self, snapshot_id: str, page: PageRequest[int]) -> Page[Recipient, int]:
        return await self._sequence_page(
            select(audience_recipient).where(audience_recipient.c.snapshot_id == snapshot_id),
            page,
            position=audience_recipient.c.sequence,
            build=_RECIPIENT.from_row,
            key=lambda r: r.sequence,
        )


class SqlAudienceImportRepository(SqlRepository):
    async def add(self, audience_import_: AudienceImport) -> AudienceImport:
        await self._conn.execute(audience_import.insert().values(**_IMPORT.to_values(audience_import_)))
        return audience_import_

    async def get(self, workspace_id: str, import_id: str) -> AudienceImport:
        row = await self._get_row(
            audience_import, "audience_import", import_id, audience_import.c.workspace_id == workspace_id
        )
        return _IMPORT.from_row(row)

    async def update(self, audience_import_: AudienceImport) -> AudienceImport:
        row = await self._update_versioned(
            audience_import,
            "audience_import",
            audience_import_.id,
            audience_import_.version,
            _IMPORT.to_values(audience_import_),
            audience_import.c.workspace_id == audience_import_.workspace_id,
        )
        return _IMPORT.from_row(row)

    async def list_page(
        self,
        workspace_id: str,
        audience_id: str,
        page: PageRequest[Keyset],
        *,
        now: datetime,
        states: Collection[ImportState] | None = None,
    ) -> Page[AudienceImport, Keyset]:
        stmt = select(audience_import).where(
            audience_import.c.workspace_id == workspace_id, audience_import.c.audience_id == audience_id
        )
        if states is not None:
            stmt = stmt.where(_in_effective_states(states, now))
        return await self._keyset_page(
            stmt,
            page,
            at=audience_import.c.created_at,
            id_=audience_import.c.id,
            build=_IMPORT.from_row,
            key=lambda found: Keyset(found.created_at, found.id),
        )

    async def staging(self) -> list[AudienceImport]:
        rows = await self._all(
            select(audience_import)
            .where(audience_import.c.state == ImportState.STAGING.value)
            .order_by(audience_import.c.expires_at, audience_import.c.id)
        )
        return [_IMPORT.from_row(row) for row in rows]

    async def renew_receiving(self, import_id: str, until: datetime) -> bool:
        result = await self._conn.execute(
            update(audience_import)
            .where(audience_import.c.id == import_id, audience_import.c.state == ImportState.STAGING.value)
            .values(receiving_until=until)
        )
        return bool(result.rowcount)

    async def fail_lapsed_upload(self, import_id: str, now: datetime, reason: str) -> AudienceImport | None:
        result = await self._conn.execute(
            update(audience_import)
            .where(
                audience_import.c.id == import_id,
                audience_import.c.state == ImportState.STAGING.value,
                audience_import.c.receiving_until < now,
            )
            .values(
                state=ImportState.FAILED.value,
                receiving_until=None,
                failure_reason=reason,
                **{column: 0 for column in _COUNT_COLUMNS},
                updated_at=self._clock(),
                version=audience_import.c.version + 1,
            )
            .returning(*audience_import.c)
        )
        row = result.mappings().first()
        return None if row is None else _IMPORT.from_row(row)

    async def stage_rows(self, import_id: str, rows: Sequence[StagedRow]) -> int:
        return await self.stage_records([staged_record(import_id, row) for row in rows])

    async def stage_records(self, records: Sequence[StagedRecord]) -> int:
        if not records:
            return 0
        # The import hot path: plain tuples with the JSON already in its canonical text, handed to the
        # driver as they are (no per-row mapping or bind processing): COPY on PostgreSQL, a few
        # multi-row statements on SQLite.
        if self._is_postgresql:
            # COPY runs on the driver connection; a statement first makes sure the unit of work's
            # transaction has begun there, so the batch commits or rolls back with it.
            # A staging batch need not wait for its WAL flush: the import's own state change that follows
            # the last batch commits synchronously, which flushes every batch before it, and a crash
            # before that leaves the import unfinished, never half staged and STAGED.
            await self._conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            driver = (await self._conn.get_raw_connection()).driver_connection
            assert driver is not None
            await driver.copy_records_to_table(
                audience_import_row.name, records=records, columns=list(_STAGED_COLUMNS)
            )
        else:
            await self._stage_sqlite(records)
        return len(records)

    async def _stage_sqlite(self, records: Sequence[StagedRecord]) -> None:
        """A few statements for the whole batch, never one per row: an executemany would queue for the
        GIL between every two rows while the event loop parses the next batch. Accepted rows, nearly all
        of them, travel as ``(line, key, fields)`` only: bound in ``VALUES`` lists of
        ``_SQLITE_VALUES_ROWS``, the rest as one JSON array SQLite unpacks itself (json_each), as does
        every other row."""
        import_id = records[0][0]
        accepted = StagedRowStatus.ACCEPTED.value
        plain: list[tuple[int, str | None, str | None]] = []
        other: list[StagedRecord] = []
        for record in records:
            if record[0] != import_id:
                raise ValueError("a staging batch belongs to one import")
            if record[4] == accepted and record[5] is None and record[6] is None and record[7] is None:
                plain.append((record[1], record[2], record[3]))
            else:
                other.append(record)
        whole = len(plain) - len(plain) % _SQLITE_VALUES_ROWS
        for start in range(0, whole, _SQLITE_VALUES_ROWS):
            values = itertools.chain.from_iterable(plain[start : start + _SQLITE_VALUES_ROWS])
            await self._conn.exec_driver_sql(_STAGE_VALUES_SQLITE, (import_id, accepted, *values))
        if whole < len(plain):
            await self._conn.exec_driver_sql(
                _STAGE_ACCEPTED_SQLITE, (import_id, accepted, _batch_encoder.encode(plain[whole:]))
            )
        if other:
            await self._conn.exec_driver_sql(_STAGE_SQLITE, (_batch_encoder.encode(other),))

    async def mark_duplicates(self, import_id: str, *, among: Collection[str] | None = None) -> int:
        row = audience_import_row
        accepted = row.c.status == StagedRowStatus.ACCEPTED.value
        ranked_rows = [row.c.import_id == import_id, accepted]
        if among is not None:
            if not among:
                return 0
            ranked_rows.append(row.c.item_key.in_(self._key_set(among)))
        # One sort by (item_key, line_number) instead of a correlated lookup per row: without table
        # statistics SQLite answers an EXISTS over earlier lines through the (status, line_number) index,
        # which is quadratic in the file size. The first accepted occurrence of a key has rank 1.
        ranked = (
            select(
                row.c.line_number,
                func.row_number()
                .over(partition_by=row.c.item_key, order_by=row.c.line_number)
                .label("occurrence"),
            )
            .where(*ranked_rows)
            .subquery("ranked")
        )
        later = select(ranked.c.line_number).where(ranked.c.occurrence > 1)
        stmt = (
            update(row)
            .where(row.c.import_id == import_id, accepted, row.c.line_number.in_(later))
            .values(
                status=StagedRowStatus.DUPLICATE.value,
                reason_code=DUPLICATE_ITEM_KEY,
                reason="the item key already appeared on an earlier line",
            )
        )
        if self._is_postgresql:
            # The ranking sorts every accepted key; with the default 4 MB it would spill a large file's
            # keys to disk.
            await self._analyze_staging()
            await self._conn.exec_driver_sql(f"SET LOCAL work_mem = '{_SORT_MEMORY}'")
        result = await self._conn.execute(stmt)
        return int(result.rowcount)

    async def _analyze_staging(self) -> None:
        """Fresh statistics after the bulk load: estimating one row per import, the planner would re-run the
        ranking for every staged row instead of hashing it once.

        ANALYZE takes a lock that another ANALYZE or a (wrap-around) VACUUM of the same table also holds,
        until their transactions end. Waiting for it could hold this upload for as long as a vacuum of
        every import's staging rows takes; instead it is tried for a moment, and skipped if another
        session holds it: whoever holds it is refreshing the same table's statistics.
        """
        previous = await self._conn.scalar(text("SELECT current_setting('lock_timeout')"))
        try:
            async with self._conn.begin_nested():
                await self._conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{_ANALYZE_LOCK_WAIT}'")
                await self._conn.exec_driver_sql("ANALYZE audience_import_row")
        except DBAPIError as error:
            code = getattr(error.orig, "pgcode", None) or getattr(error.orig, "sqlstate", None)
            if code != _LOCK_NOT_AVAILABLE:
                raise
            _log.info(
                "staging statistics not refreshed: another session is analysing or vacuuming the table",
                extra={"event": "IMPORT_STAGING_ANALYZE_SKIPPED"},
            )
        # SET LOCAL survives the released savepoint; the rest of the transaction waits as it always did.
        await self._conn.execute(text("SELECT set_config('lock_timeout', :value, true)"), {"value": previous})

    def _key_set(self, keys: Collection[str]) -> Select[Any]:
        """The keys as one bound parameter the database turns into a set (hashed or indexed for IN)."""
        if self._is_postgresql:
            return select(func.unnest(bindparam("keys", list(keys), type_=ARRAY(Text()))))
        values = func.json_each(bindparam("keys", _batch_encoder.encode(list(keys)))).table_valued("value")
        return select(values.c.value)

    async def count_staged(self, import_id: str) -> ImportCounts:
        rows = await self._all(
            select(audience_import_row.c.status, func.count().label("n"))
            .where(audience_import_row.c.import_id == import_id)
            .group_by(audience_import_row.c.status)
        )
        by_status = {StagedRowStatus(r["status"]): int(r["n"]) for r in rows}
        return ImportCounts(
            total_rows=sum(by_status.values()),
            accepted_rows=by_status.get(StagedRowStatus.ACCEPTED, 0),
            rejected_rows=by_status.get(StagedRowStatus.REJECTED, 0),
            duplicate_rows=by_status.get(StagedRowStatus.DUPLICATE, 0),
        )

    async def list_staged(
        self,
        import_id: str,
        page: PageRequest[int],
        *,
        statuses: Collection[StagedRowStatus] | None = None,
    ) -> Page[StagedRow, int]:
        stmt = select(audience_import_row).where(audience_import_row.c.import_id == import_id)
        if statuses is not None and set(statuses) == _ERROR_STATUSES:
            stmt = stmt.where(_STAGED_ERRORS)
        elif statuses is not None:
            stmt = stmt.where(audience_import_row.c.status.in_([s.value for s in statuses]))
        return await self._sequence_page(
            stmt,
            page,
            position=audience_import_row.c.line_number,
            build=_STAGED.from_row,
            key=lambda r: r.line_number,
        )

    async def commit(
        self,
        audience_: Audience,
        audience_import_: AudienceImport,
        *,
        digest_from: AudienceImportRepository | None = None,
    ) -> CommittedImport:
        now = self._clock()
        await self._claim_for_commit(audience_import_)
        snapshot_id = new_id()
        if digest_from is None:
            digest = await self.accepted_digest(audience_import_.id)
            copied = await self._copy_recipients(audience_import_.id, snapshot_id)
        else:
            # The copy runs inside the database and the digest is mostly this process's own work
            # (decoding and hashing every row), so reading it on the other connection meanwhile takes
            # it off the commit's critical path. The staged rows of a STAGED import change only with
            # its state, which this transaction has just claimed, so both read the same rows.
            reading = asyncio.ensure_future(digest_from.accepted_digest(audience_import_.id))
            try:
                copied = await self._copy_recipients(audience_import_.id, snapshot_id)
                digest = await reading
            finally:
                await _settled(reading)
        if digest.rows != copied:
            raise ImportStateConflict(
                audience_import_.id,
                ImportState.STAGED.value,
                "commit",
                why=f"audience import {audience_import_.id} changed while it was being committed "
                f"({copied} rows copied, {digest.rows} read for the checksum); commit it again",
            )
        snapshot = AudienceSnapshot(
            id=snapshot_id,
            workspace_id=audience_.workspace_id,
            audience_id=audience_.id,
            revision=audience_.latest_revision + 1,
            recipient_count=copied,
            fields=list(audience_import_.columns),
            checksum=digest.checksum,
            source_import_id=audience_import_.id,
            created_at=now,
            updated_at=now,
        )
        updated_audience = _AUDIENCE.from_row(
            await self._update_versioned(
                audience,
                "audience",
                audience_.id,
                audience_.version,
                {
                    "latest_snapshot_id": snapshot.id,
                    "latest_revision": snapshot.revision,
                    "recipient_count": copied,
                },
                audience.c.workspace_id == audience_.workspace_id,
                audience.c.deleted_at.is_(None),
            )
        )
        await self._conn.execute(audience_snapshot.insert().values(**_SNAPSHOT.to_values(snapshot)))
        committed = await self._one(
            update(audience_import)
            .where(audience_import.c.id == audience_import_.id)
            .values(snapshot_id=snapshot.id)
            .returning(*audience_import.c)
        )
        assert committed is not None
        return CommittedImport(
            audience=updated_audience, snapshot=snapshot, audience_import=_IMPORT.from_row(committed)
        )

    async def _copy_recipients(self, import_id: str, snapshot_id: str) -> int:
        """The snapshot's recipients, numbered in line order, with one ``INSERT … SELECT``; returns how
        many rows it copied."""
        staged = audience_import_row
        # Staging keeps canonical text; the recipients column is JSONB on PostgreSQL.
        fields = type_coerce(staged.c.fields_json, Text())
        copy = select(
            literal(snapshot_id, String(ID_LENGTH)),
            func.row_number().over(order_by=staged.c.line_number),
            staged.c.item_key,
            cast(fields, JSONB) if self._is_postgresql else fields,
        ).where(staged.c.import_id == import_id, staged.c.status == StagedRowStatus.ACCEPTED.value)
        result = await self._conn.execute(
            insert(audience_recipient).from_select(
                ["snapshot_id", "sequence", "item_key", "fields_json"], copy
            )
        )
        return int(result.rowcount)

    async def _claim_for_commit(self, audience_import_: AudienceImport) -> None:
        """STAGED → COMMITTED with the version check, before any heavy copying."""
        row = await self._one(
            update(audience_import)
            .where(
                audience_import.c.id == audience_import_.id,
                audience_import.c.workspace_id == audience_import_.workspace_id,
                audience_import.c.state == ImportState.STAGED.value,
                audience_import.c.version == audience_import_.version,
            )
            .values(
                state=ImportState.COMMITTED.value,
                updated_at=self._clock(),
                version=audience_import.c.version + 1,
            )
            .returning(audience_import.c.id)
        )
        if row is not None:
            return
        current = await self._one(
            select(audience_import.c.state).where(
                audience_import.c.id == audience_import_.id,
                audience_import.c.workspace_id == audience_import_.workspace_id,
            )
        )
        if current is None:
            raise NotFound("audience_import", audience_import_.id)
        if current["state"] != ImportState.STAGED.value:
            raise ImportStateConflict(audience_import_.id, current["state"], "commit")
        raise VersionConflict("audience_import", audience_import_.id, audience_import_.version)

    async def accepted_digest(self, import_id: str) -> AcceptedDigest:
        """SHA-256 over ``item_key TAB canonical-fields LF`` of the accepted rows in line order, and their
        number, streamed from the database so memory stays flat for any audience size.

        Staging stores the canonical text itself, so the database hands the stored text over as it is,
        inside the unit of work's transaction: PostgreSQL as one ``COPY … TO STDOUT`` stream whose rows
        are exactly those lines once the format's escapes are undone, SQLite through its own cursor."""
        digest = hashlib.sha256()
        accepted = StagedRowStatus.ACCEPTED.value
        driver = (await self._conn.get_raw_connection()).driver_connection
        assert driver is not None
        if self._is_postgresql:
            decoder = CopyTextDecoder()
            count = 0

            async def take(chunk: bytes) -> None:
                nonlocal count
                # Newlines inside a value arrive escaped, so every raw newline ends one row.
                count += chunk.count(b"\n")
                digest.update(decoder.decode(chunk))

            await driver.copy_from_query(_ACCEPTED_ROWS_PG, import_id, accepted, output=take)
            decoder.finish()
            return AcceptedDigest(digest.hexdigest(), count)
        count = 0
        async with driver.execute(_ACCEPTED_LINES_SQLITE, (import_id, accepted)) as rows:
            while records := await rows.fetchmany(_CHECKSUM_CHUNK):
                digest.update("".join(line for (line,) in records).encode())
                count += len(records)
        return AcceptedDigest(digest.hexdigest(), count)

    async def discard_staging(self, import_id: str) -> int:
        result = await self._conn.execute(
            delete(audience_import_row).where(audience_import_row.c.import_id == import_id)
        )
        return int(result.rowcount)

    async def expire_open(self, now: datetime, limit: int) -> int:
        due = (
            select(audience_import.c.id)
            .where(
                audience_import.c.state.in_([s.value for s in _OPEN_STATES]),
                audience_import.c.expires_at <= now,
            )
            .limit(limit)
        )
        result = await self._conn.execute(
            update(audience_import)
            .where(
                audience_import.c.id.in_(due),
                audience_import.c.state.in_([s.value for s in _OPEN_STATES]),
            )
            .values(
                state=ImportState.EXPIRED.value,
                updated_at=self._clock(),
                version=audience_import.c.version + 1,
            )
        )
        return int(result.rowcount)

    async def with_expired_staging(self, now: datetime, limit: int) -> list[str]:
        staged = select(literal(1)).where(audience_import_row.c.import_id == audience_import.c.id).exists()
        rows = await self._all(
            select(audience_import.c.id)
            .where(audience_import.c.expires_at <= now, staged)
            .order_by(audience_import.c.expires_at)
            .limit(limit)
        )
        return [str(row["id"]) for row in rows]

    async def discard_staging_rows(self, import_id: str, limit: int) -> int:
        row = audience_import_row
        # The batch's last line first, read along the primary key (import_id, line_number), then one
        # range delete. ``line_number IN (SELECT … LIMIT n)`` was planned by PostgreSQL, on the statistics
        # an interrupted upload leaves behind (the table looked empty), as a nested loop rescanning the
        # subquery for every staged row: minutes for a few hundred thousand rows, at an instance's start.
        bound = await self._conn.scalar(
            select(row.c.line_number)
            .where(row.c.import_id == import_id)
            .order_by(row.c.line_number)
            .offset(limit - 1)
            .limit(1)
        )
        batch = delete(row).where(row.c.import_id == import_id)
        if bound is not None:
            batch = batch.where(row.c.line_number <= bound)
        result = await self._conn.execute(batch)
        return int(result.rowcount)


__all__ = ["DUPLICATE_ITEM_KEY", "SqlAudienceImportRepository", "SqlAudienceRepository"]


async def _settled(reading: asyncio.Future[AcceptedDigest]) -> None:
    """Stop a digest still being read (the commit failed first) and wait until its connection is idle,
    so its unit of work ends cleanly. Its own error is not the commit's to report; the cancellation of
    the commit itself still propagates."""
    if not reading.done():
        reading.cancel()
    try:
        await reading
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
    except Exception:  # noqa: S110  # the commit is already failing with its own error
        pass
