"""Explicit mappers from message, audience, import and job entities to the public API's JSON bodies,
and the streamed CSV of an import's rejected rows.

Nothing here returns an entity as is. Times are UTC ISO-8601 with ``Z``. Every CSV cell that a
spreadsheet could evaluate as a formula is neutralised with a leading apostrophe, and so is the ``raw``
line shown in a preview.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final

from wepush.agent.engine import neutralize_csv_cell
from wepush.server.api._render_core import iso
from wepush.server.application._import_settings import ImportSettings
from wepush.server.application._job_policies import policies_for_api
from wepush.server.application.imports import ImportPreview
from wepush.server.application.jobs import JobView
from wepush.server.domain import (
    Audience,
    AudienceImport,
    AudienceSnapshot,
    Message,
    MessageRevision,
    Recipient,
    StagedRow,
    StagedRowStatus,
)

__all__ = [
    "ERROR_CSV_COLUMNS",
    "UTF8_BOM",
    "error_csv",
    "render_audience",
    "render_import",
    "render_import_preview",
    "render_job",
    "render_message",
    "render_recipient",
    "render_revision",
    "render_snapshot",
]

ERROR_CSV_COLUMNS: Final = ("lineNumber", "code", "reason", "raw")
UTF8_BOM: Final = "\ufeff".encode()
_MAX_REASON_CHARS: Final = 1024
_MAX_RAW_CHARS: Final = 4096


def render_message(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "workspaceId": message.workspace_id,
        "name": message.name,
        "description": message.description,
        "providerId": message.provider_id,
        "latestRevision": message.latest_revision,
        "createdAt": iso(message.created_at),
        "updatedAt": iso(message.updated_at),
        "version": message.version,
    }


def render_revision(revision: MessageRevision) -> dict[str, Any]:
    return {
        "id": revision.id,
        "messageId": revision.message_id,
        "revision": revision.revision,
        "content": revision.content,
        "contentHash": revision.content_hash,
        "createdAt": iso(revision.created_at),
    }


def render_audience(audience: Audience) -> dict[str, Any]:
    return {
        "id": audience.id,
        "workspaceId": audience.workspace_id,
        "name": audience.name,
        "description": audience.description,
        "latestSnapshotId": audience.latest_snapshot_id,
        "latestRevision": audience.latest_revision,
        "recipientCount": audience.recipient_count,
        "createdAt": iso(audience.created_at),
        "updatedAt": iso(audience.updated_at),
        "version": audience.version,
    }


def render_import(audience_import: AudienceImport) -> dict[str, Any]:
    settings = ImportSettings.from_options(audience_import.format, audience_import.options)
    counts = audience_import.counts
    body: dict[str, Any] = {
        "id": audience_import.id,
        "audienceId": audience_import.audience_id,
        "state": audience_import.state.value,
        "format": audience_import.format.value,
        "hasHeader": settings.has_header,
        "delimiter": settings.delimiter,
        "encoding": settings.encoding,
        "trimWhitespace": settings.trim_whitespace,
        "fieldMapping": dict(settings.field_mapping),
        "dedupeKeys": list(settings.dedupe_keys),
        "counts": {
            "totalRows": counts.total_rows,
            "acceptedRows": counts.accepted_rows,
            "rejectedRows": counts.rejected_rows,
            "duplicateRows": counts.duplicate_rows,
        },
        "failureReason": audience_import.failure_reason,
        "snapshotId": audience_import.snapshot_id,
        "createdAt": iso(audience_import.created_at),
        "updatedAt": iso(audience_import.updated_at),
        "expiresAt": iso(audience_import.expires_at),
    }
    if settings.item_id_field is not None:
        body["itemIdField"] = settings.item_id_field
    return body


def _code_of(row: StagedRow) -> str:
    if row.reason_code is not None:
        return row.reason_code
    return "DUPLICATE" if row.status is StagedRowStatus.DUPLICATE else "REJECTED"


def render_import_preview(preview: ImportPreview) -> dict[str, Any]:
    return {
        "importId": preview.audience_import.id,
        "columns": [column[:256] for column in preview.columns],
        "accepted": [
            {"lineNumber": row.line_number, "itemId": row.item_key or "", "fields": row.fields or {}}
            for row in preview.accepted
        ],
        "rejected": [
            {
                "lineNumber": row.line_number,
                "code": _code_of(row)[:64],
                "reason": (row.reason or "")[:_MAX_REASON_CHARS],
                "raw": neutralize_csv_cell(row.raw or "")[:_MAX_RAW_CHARS],
            }
            for row in preview.rejected
        ],
    }


def render_snapshot(snapshot: AudienceSnapshot) -> dict[str, Any]:
    return {
        "id": snapshot.id,
        "audienceId": snapshot.audience_id,
        "revision": snapshot.revision,
        "recipientCount": snapshot.recipient_count,
        "fields": list(snapshot.fields),
        "checksum": snapshot.checksum,
        "sourceImportId": snapshot.source_import_id,
        "createdAt": iso(snapshot.created_at),
    }


def render_recipient(recipient: Recipient) -> dict[str, Any]:
    return {"sequence": recipient.sequence, "itemId": recipient.item_key, "fields": recipient.fields}


def render_job(view: JobView) -> dict[str, Any]:
    job = view.job
    return {
        "id": job.id,
        "workspaceId": job.workspace_id,
        "name": job.name,
        "description": job.description,
        "accountId": job.account_id,
        "messageId": job.message_id,
        "messageRevision": job.message_revision,
        "audienceSnapshotId": job.audience_snapshot_id,
        "providerId": view.provider_id,
        "policies": policies_for_api(job.policies),
        "createdAt": iso(job.created_at),
        "updatedAt": iso(job.updated_at),
        "version": job.version,
    }


def _csv_text(rows: Iterable[Iterable[Any]]) -> bytes:
    buffer = io.StringIO()
    # Every cell quoted: a delimiter inside a raw line (read by a spreadsheet set to split on ";") stays
    # inside its cell, where the leading-character guard applies.
    writer = csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        writer.writerow([neutralize_csv_cell(cell) for cell in row])
    return buffer.getvalue().encode("utf-8")


async def error_csv(pages: AsyncIterator[list[StagedRow]]) -> AsyncIterator[bytes]:
    """A byte-order mark, the header, then one CSV chunk per page of rejected rows, as the pages arrive.

    The mark is how Excel tells UTF-8 from the system's code page: without it, the Chinese in a raw line
    opened on a Chinese Windows showed as mojibake (CSV readers such as Python's ``utf-8-sig`` skip it)."""
    yield UTF8_BOM + _csv_text([ERROR_CSV_COLUMNS])
    async for page in pages:
        yield _csv_text([row.line_number, _code_of(row), row.reason or "", (row.raw or "")] for row in page)
