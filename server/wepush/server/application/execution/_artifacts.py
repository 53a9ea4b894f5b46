"""A run's artifacts: outcome files (JSON Lines), the CSV export and the run log.

Each file has an ``artifact`` row first (UPLOADING), then its bytes are streamed into the ArtifactStore,
and only when the store reports the final size and SHA-256 does the row become READY. Rows are written
through the caller's transaction scope, so while a run executes they carry its lease fence. An upload
that is given up leaves its row FAILED and says so in one WARNING line (``ARTIFACT_UPLOAD_FAILED``)
naming the run and the artifact type: the outcome files are written again from the stored results once
the run has ended (``OutcomeArtifactRepair``), the run log cannot be.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from wepush.agent.engine import (
    CSV_BASE_COLUMNS,
    ArtifactRef,
    ItemResult,
    ItemState,
    SecretMasker,
    format_instant,
    neutralize_csv_cell,
)
from wepush.server.domain import (
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    PageRequest,
    UnitOfWorkFactory,
    new_id,
)
from wepush.server.domain.secrets import SecretScrubber

from ._fence import TransactionScope
from ._store import ArtifactStore, ArtifactUpload, StoredObject

__all__ = [
    "ARTIFACT_KINDS",
    "CSV_EXPORT",
    "OUTCOME_TYPES",
    "RUN_LOG",
    "ArtifactKind",
    "ResultArtifacts",
    "RetentionPolicy",
    "RunArtifactWriter",
    "RunLog",
    "log_line",
]

_NDJSON = "application/x-ndjson"
_log = logging.getLogger("wepush.server.execution")


@dataclass(frozen=True, slots=True)
class ArtifactKind:
    """``artifact_type`` is the API's ArtifactType; ``file_name`` is the download name, never a path."""

    artifact_type: str
    file_name: str
    content_type: str
    extension: str
    retention: str


ARTIFACT_KINDS: Mapping[ItemState, ArtifactKind] = {
    ItemState.SUCCEEDED: ArtifactKind("SUCCEEDED_ITEMS", "success.jsonl", _NDJSON, "jsonl", "results"),
    ItemState.FAILED: ArtifactKind("FAILED_ITEMS", "failed.jsonl", _NDJSON, "jsonl", "results"),
    ItemState.UNKNOWN: ArtifactKind("UNKNOWN_ITEMS", "unknown.jsonl", _NDJSON, "jsonl", "results"),
    ItemState.UNSENT: ArtifactKind("UNSENT_ITEMS", "unsent.jsonl", _NDJSON, "jsonl", "results"),
    ItemState.SKIPPED: ArtifactKind("SKIPPED_ITEMS", "skipped.jsonl", _NDJSON, "jsonl", "results"),
}
RUN_LOG = ArtifactKind("RUN_LOG", "logs.jsonl", _NDJSON, "jsonl", "logs")
CSV_EXPORT = ArtifactKind("RESULTS_EXPORT", "results.csv", "text/csv; charset=utf-8", "csv", "exports")
#: The files made of item results alone, so the stored results can write them again; not the run log,
#: whose lines (provider diagnostics among them) live nowhere else.
OUTCOME_TYPES: frozenset[str] = frozenset(
    {*(kind.artifact_type for kind in ARTIFACT_KINDS.values()), CSV_EXPORT.artifact_type}
)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """The seed's default retention: run results 90 days, run logs 30 days, temporary exports 24 hours."""

    run_results: timedelta = timedelta(days=90)
    logs: timedelta = timedelta(days=30)
    temporary_exports: timedelta = timedelta(hours=24)

    def expiry(self, kind: ArtifactKind, created_at: datetime) -> datetime:
        ttl = {"results": self.run_results, "logs": self.logs, "exports": self.temporary_exports}[
            kind.retention
        ]
        return created_at + ttl


class _OpenFile:
    __slots__ = ("artifact", "broken", "closed", "kind", "records", "upload")

    def __init__(self, kind: ArtifactKind, artifact: Artifact, upload: ArtifactUpload) -> None:
        self.kind = kind
        self.artifact = artifact
        self.upload = upload
        self.records = 0
        self.broken = False
        self.closed = False


class RunArtifactWriter:
    """Creates, streams and settles the artifact files of one run."""

    def __init__(
        self,
        *,
        store: ArtifactStore,
        tx: TransactionScope,
        workspace_id: str,
        run_id: str,
        clock: Callable[[], datetime],
        retention: RetentionPolicy,
    ) -> None:
        self._store = store
        self._tx = tx
        self._workspace_id = workspace_id
        self._run_id = run_id
        self._clock = clock
        self._retention = retention

    @property
    def run_id(self) -> str:
        return self._run_id

    async def begin(self, kind: ArtifactKind) -> _OpenFile:
        now = self._clock()
        artifact_id = new_id()
        key = self._store.new_key(
            workspace_id=self._workspace_id,
            owner_type=ArtifactOwnerType.RUN,
            owner_id=self._run_id,
            artifact_id=artifact_id,
            extension=kind.extension,
        )
        row = Artifact(
            id=artifact_id,
            workspace_id=self._workspace_id,
            owner_type=ArtifactOwnerType.RUN,
            owner_id=self._run_id,
            artifact_type=kind.artifact_type,
            storage_key=key,
            content_type=kind.content_type,
            file_name=kind.file_name,
            expires_at=self._expires_at(kind, now),
            created_at=now,
            updated_at=now,
        )
        row = await self._announce(row)
        try:
            upload = await self._store.begin_upload(key)
        except Exception as exc:
            await self._mark_failed(row, exc)
            raise
        return _OpenFile(kind, row, upload)

    def _expires_at(self, kind: ArtifactKind, now: datetime) -> datetime:
        return self._retention.expiry(kind, now)

    async def _announce(self, row: Artifact) -> Artifact:
        """Record the file as UPLOADING before any of its bytes go to the store."""
        async with self._tx() as uow:
            return await uow.artifacts.add(row)

    async def write(self, file: _OpenFile, data: bytes) -> None:
        if file.broken:
            raise RuntimeError(f"artifact {file.kind.file_name} of run {self._run_id} failed earlier")
        try:
            await file.upload.write(data)
        except Exception as exc:
            await self.fail(file, exc)
            raise

    async def finish(self, file: _OpenFile) -> Artifact:
        """Complete the upload and move the row UPLOADING → READY with the store's size and SHA-256."""
        if file.broken:
            raise RuntimeError(f"artifact {file.kind.file_name} of run {self._run_id} failed earlier")
        file.closed = True
        try:
            stored = await self._store.complete(file.upload)
        except Exception as exc:
            file.broken = True
            await self._mark_failed(file.artifact, exc)
            raise
        file.artifact = await self._settle_ready(file.artifact, stored)
        return file.artifact

    async def _settle_ready(self, row: Artifact, stored: StoredObject) -> Artifact:
        async with self._tx() as uow:
            return await uow.artifacts.mark_ready(
                self._workspace_id,
                row.id,
                expected_version=row.version,
                size_bytes=stored.size_bytes,
                sha256=stored.sha256 or "",
            )

    async def fail(self, file: _OpenFile, cause: BaseException | str = "discarded") -> None:
        """Discard the upload and record the row FAILED (the bytes never become visible)."""
        if file.broken or file.closed:
            return
        file.broken = file.closed = True
        try:
            await self._store.abort(file.upload)
        finally:
            await self._mark_failed(file.artifact, cause)

    async def abandon(self, file: _OpenFile) -> None:
        """Drop the upload without touching the database (the task is being torn down); the row stays
        UPLOADING until a recovery marks it FAILED."""
        if file.broken or file.closed:
            return
        file.broken = file.closed = True
        with contextlib.suppress(Exception):
            await self._store.abort(file.upload)

    async def _mark_failed(self, row: Artifact, cause: BaseException | str) -> None:
        async with self._tx() as uow:
            current = await uow.artifacts.get(self._workspace_id, row.id)
            if current.state is not ArtifactState.UPLOADING:
                return
            await uow.artifacts.update(_with_state(current, ArtifactState.FAILED))
        _given_up(self._workspace_id, self._run_id, row, cause)


def _given_up(workspace_id: str, run_id: str, row: Artifact, cause: BaseException | str) -> None:
    """The one WARNING line of an upload given up: which run lost which file, why, and what follows."""
    # The exception's class, not its text: a store's messages quote endpoints and keys.
    reason = cause if isinstance(cause, str) else type(cause).__name__
    later = (
        "it is written again from the stored item results once the run has ended and the store is back"
        if row.artifact_type in OUTCOME_TYPES
        else "it cannot be written again"
    )
    _log.warning(
        "run %s: the %s artifact %s was given up (%s); %s",
        run_id,
        row.artifact_type,
        row.id,
        reason,
        later,
        extra={
            "event": "ARTIFACT_UPLOAD_FAILED",
            "workspaceId": workspace_id,
            "runId": run_id,
            "artifactId": row.id,
            "artifactType": row.artifact_type,
        },
    )


def _with_state(artifact: Artifact, state: ArtifactState) -> Artifact:
    return replace(artifact, state=state)


# Cells the engine formats itself (integers, enum names, ISO instants, None): nothing a spreadsheet could
# take for a formula, so only the other columns go through ``neutralize_csv_cell``. The csv module writes
# None as an empty cell and integers as digits, exactly as ``neutralize_csv_cell`` would.
_ENGINE_FORMATTED = frozenset(
    {"sequence", "state", "attempt", "errorCategory", "startedAt", "finishedAt", "latencyMs"}
)
_CSV_COLUMNS = tuple((name, name not in _ENGINE_FORMATTED) for name in CSV_BASE_COLUMNS)
# What ``ItemResult.to_json_line`` uses: compact, UTF-8 kept readable.
_json_line = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# Lines are collected per file and handed to the store in chunks of about this size.
_CHUNK_BYTES = 64 * 1024


class _Buffered:
    """Text waiting for one open file: JSON lines, or CSV rows as cell lists."""

    __slots__ = ("file", "lines", "prefix", "rows", "size")

    def __init__(self, file: _OpenFile, prefix: str = "") -> None:
        self.file = file
        self.lines: list[str] = []
        self.rows: list[list[Any]] = []
        self.size = 0
        self.prefix = prefix
        """Written once, before the first text (a byte-order mark)."""


def _csv_text(rows: list[list[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL).writerows(rows)
    return buffer.getvalue()


class ResultArtifacts:
    """The engine's ArtifactSink: one JSON Lines file per outcome plus a formula-safe CSV of every item.

    Files are begun on their first item, so an outcome nobody reached leaves no empty artifact behind.
    Each item's ``item-result`` dict is built once and serves both its JSON line and its CSV row; text is
    collected per file and written to the store in chunks (and at ``close``). A file whose upload fails
    is discarded (row FAILED) and later writes to it fail fast; the engine then stops feeding this sink
    without stopping the run. A write that fails has buffered nothing, so the engine may retry it.

    ``only`` limits the files to those artifact types (the ones a rebuild writes again); items of other
    outcomes then go to the CSV export alone, if that is among them.
    """

    def __init__(
        self, writer: RunArtifactWriter, *, csv_export: bool = True, only: Collection[str] | None = None
    ) -> None:
        self._writer = writer
        self._files: dict[ItemState, _Buffered | None] = {}
        self._wanted = None if only is None else frozenset(only)
        self._csv_enabled = csv_export and (only is None or CSV_EXPORT.artifact_type in only)
        self._csv: _Buffered | None = None
        self._csv_fields: tuple[str, ...] = ()
        self._closed = False

    async def open(self) -> None:
        return None

    async def write(self, item_result: ItemResult) -> None:
        row = item_result.to_json_dict()
        recipient: Mapping[str, Any] = row["recipient"] or {}
        state = item_result.state
        if state in self._files:
            file = self._files[state]
        else:
            kind = ARTIFACT_KINDS[state]
            wanted = self._wanted is None or kind.artifact_type in self._wanted
            file = _Buffered(await self._writer.begin(kind)) if wanted else None
            self._files[state] = file
        csv_file = self._csv
        if self._csv_enabled and csv_file is None:
            # UTF-8 with a byte-order mark, as the import errors CSV: Excel then shows Chinese text as it is.
            csv_file = self._csv = _Buffered(await self._writer.begin(CSV_EXPORT), prefix="\ufeff")
            self._csv_fields = tuple(sorted(recipient))
            csv_file.rows.append([*CSV_BASE_COLUMNS, *(f"recipient.{name}" for name in self._csv_fields)])
        for target in (file, csv_file):
            if target is not None and target.file.broken:
                name = target.file.kind.file_name
                raise RuntimeError(f"artifact {name} of run {self._writer.run_id} failed earlier")
        # Flush what is already buffered first: a failure then leaves this item unbuffered.
        if file is not None and file.size >= _CHUNK_BYTES:
            await self._flush(file)
        if csv_file is not None and csv_file.size >= _CHUNK_BYTES:
            await self._flush(csv_file)
        line = _json_line(row) + "\n"
        if file is not None:
            file.lines.append(line)
            file.size += len(line)
            file.file.records += 1
        if csv_file is not None:
            neutralize = neutralize_csv_cell
            cells = [neutralize(row[name]) if unsafe else row[name] for name, unsafe in _CSV_COLUMNS]
            cells += [neutralize(recipient.get(name)) for name in self._csv_fields]
            csv_file.rows.append(cells)
            # Rough size: a CSV row is about as long as the JSON line it was taken from.
            csv_file.size += len(line)
            csv_file.file.records += 1

    async def _flush(self, buffered: _Buffered) -> None:
        if buffered.rows:
            text = _csv_text(buffered.rows)
        elif buffered.lines:
            text = "".join(buffered.lines)
        else:
            return
        text, buffered.prefix = buffered.prefix + text, ""
        buffered.lines, buffered.rows, buffered.size = [], [], 0
        await self._writer.write(buffered.file, text.encode("utf-8"))

    def _open(self) -> list[_Buffered]:
        files = [file for file in self._files.values() if file is not None]
        return [*files, *([] if self._csv is None else [self._csv])]

    async def close(self) -> tuple[ArtifactRef, ...]:
        if self._closed:
            return ()
        self._closed = True
        # Side by side: each file's last part and its completion wait on the store, and a store that
        # hangs costs each file its full patience; one after another, a run's end waited for the sum.
        closed = await asyncio.gather(*(self._close_file(b) for b in self._open() if not b.file.broken))
        return tuple(ref for ref in closed if ref is not None)

    async def _close_file(self, buffered: _Buffered) -> ArtifactRef | None:
        file = buffered.file
        try:
            await self._flush(buffered)
            artifact = await self._writer.finish(file)
        except Exception:
            return None  # the writer recorded the file FAILED; the others still finish
        return ArtifactRef(
            name=artifact.file_name,
            kind=artifact.artifact_type,
            uri=f"wepush-artifact:{artifact.id}",
            media_type=artifact.content_type,
            size_bytes=artifact.size_bytes or 0,
            record_count=file.records,
        )

    async def discard(self) -> None:
        """Abort every file still open (the run cannot finish normally)."""
        self._closed = True
        for buffered in self._open():
            await self._writer.fail(buffered.file)

    async def abandon(self) -> None:
        self._closed = True
        for buffered in self._open():
            await self._writer.abandon(buffered.file)


def log_line(
    occurred_at: datetime, event: str, data: Mapping[str, Any], *, run_id: str, level: str = "INFO"
) -> dict[str, Any]:
    """One structured line of the run log."""
    return {
        "occurredAt": format_instant(occurred_at),
        "level": level,
        "runId": run_id,
        "event": event,
        "data": dict(data),
    }


class RunLog:
    """``logs.jsonl``: the run's events and diagnostics as structured lines, begun on the first line.

    Every line passes through ``redactor`` first, like every other log line the Service writes: event
    data carries provider diagnostics, which may quote what the provider was sent. The executing run
    passes the Service's redactor, which also knows the secret values the run resolved; without one the
    shared rules still apply.
    """

    def __init__(self, writer: RunArtifactWriter, *, redactor: SecretScrubber | None = None) -> None:
        self._writer = writer
        self._redactor: SecretScrubber = redactor if redactor is not None else SecretMasker()
        self._file: _OpenFile | None = None

    def _encode(self, line: Mapping[str, Any]) -> bytes:
        redactor = self._redactor
        # Values json cannot encode are rendered with str(), which may quote a secret too.
        text = json.dumps(
            redactor.json(line),
            ensure_ascii=False,
            separators=(",", ":"),
            default=lambda value: redactor.text(str(value)),
        )
        return (text + "\n").encode("utf-8")

    async def append(self, line: Mapping[str, Any]) -> None:
        if self._file is not None and self._file.broken:
            return
        try:
            if self._file is None:
                self._file = await self._writer.begin(RUN_LOG)
            data = self._encode(line)
            await self._writer.write(self._file, data)
            self._file.records += 1
        except Exception:
            # The log is a convenience copy of events the database already holds; losing it never fails a run.
            return

    async def replay(self, uow: UnitOfWorkFactory, run_id: str) -> None:
        """Append every event the database holds for the run: the log of a run the Service ends itself
        (recovery, a cancel before start), where no executor wrote one as it went."""
        after: int | None = None
        while True:
            async with uow(read_only=True) as unit:
                page = await unit.run_events.list_page(run_id, PageRequest(limit=500, after=after))
            for event in page.items:
                level = "ERROR" if event.type in ("ITEM_ERROR", "RUN_LOST") else "INFO"
                await self.append(
                    log_line(event.occurred_at, event.type, event.data, run_id=run_id, level=level)
                )
            if page.next_after is None:
                return
            after = page.next_after

    async def finish(self) -> Artifact | None:
        if self._file is None or self._file.broken:
            return None
        try:
            return await self._writer.finish(self._file)
        except Exception:
            # Recorded FAILED by the writer; a missing log never holds a run back from its terminal state.
            return None

    async def discard(self) -> None:
        if self._file is not None:
            await self._writer.fail(self._file)

    async def abandon(self) -> None:
        if self._file is not None:
            await self._writer.abandon(self._file)
