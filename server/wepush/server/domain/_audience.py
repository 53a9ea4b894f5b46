"""Audiences, their imports (staged row by row) and immutable snapshots of recipients."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ._common import JsonObject, canonical_json, new_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Audience:
    """A recipient list. Recipient changes never edit rows: each commit creates a new snapshot."""

    workspace_id: str
    name: str
    description: str = ""
    latest_snapshot_id: str | None = None
    latest_revision: int = 0
    recipient_count: int = 0
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    id: str = field(default_factory=new_id)
    version: int = 1


class ImportState(StrEnum):
    CREATED = "CREATED"
    STAGING = "STAGING"
    STAGED = "STAGED"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"
    DISCARDED = "DISCARDED"


class ImportFormat(StrEnum):
    CSV = "CSV"
    TXT = "TXT"


class StagedRowStatus(StrEnum):
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"
    DUPLICATE = "DUPLICATE"


@dataclass(frozen=True, slots=True)
class ImportCounts:
    total_rows: int = 0
    accepted_rows: int = 0
    rejected_rows: int = 0
    duplicate_rows: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AudienceImport:
    """One upload being parsed into the staging table. ``original_filename`` is display-only."""

    workspace_id: str
    audience_id: str
    state: ImportState = ImportState.CREATED
    format: ImportFormat
    options: JsonObject
    counts: ImportCounts = ImportCounts()
    columns: list[str] = field(default_factory=list)
    original_filename: str | None = None
    failure_reason: str | None = None
    snapshot_id: str | None = None
    expires_at: datetime
    receiving_until: datetime | None = None
    """While STAGING: the end of the receiving instance's lease on the upload, which that instance
    renews while the file arrives. Past it the upload is abandoned (its instance stopped answering)."""
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedRow:
    """A parsed input line. Accepted rows carry ``item_key`` and ``fields``; rejected rows a reason.

    Duplicates are not decided by the parser: the repository marks every accepted row whose
    ``item_key`` already appeared on an earlier line as DUPLICATE (the first occurrence wins).
    """

    line_number: int
    status: StagedRowStatus
    item_key: str | None = None
    fields: JsonObject | None = None
    reason_code: str | None = None
    reason: str | None = None
    raw: str | None = None


#: A staged row as the bulk path writes it, in ``audience_import_row`` column order: import id, line
#: number, item key, recipient fields as canonical JSON text, status, reason code, reason, raw line.
#: Plain tuples because an import writes millions of them: a dataclass per row costs more than the
#: database write it feeds.
StagedRecord = tuple[str, int, str | None, str | None, str, str | None, str | None, str | None]


def staged_record(import_id: str, row: StagedRow) -> StagedRecord:
    fields = None if row.fields is None else canonical_json(row.fields)
    return (
        import_id,
        row.line_number,
        row.item_key,
        fields,
        row.status.value,
        row.reason_code,
        row.reason,
        row.raw,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AudienceSnapshot:
    """Immutable set of recipients; ``revision`` numbers are unique per audience and start at 1."""

    workspace_id: str
    audience_id: str
    revision: int
    recipient_count: int
    fields: list[str]
    checksum: str
    source_import_id: str | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True)
class AcceptedDigest:
    """What a snapshot records of its recipients: SHA-256 over ``item_key TAB canonical-fields LF`` of
    the ACCEPTED staging rows in line order (hex), and how many rows that was."""

    checksum: str
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipient:
    """One recipient of a snapshot; ``sequence`` is 1-based and dense in input order."""

    snapshot_id: str
    sequence: int
    item_key: str
    fields: JsonObject


@dataclass(frozen=True, slots=True)
class CommittedImport:
    audience: Audience
    snapshot: AudienceSnapshot
    audience_import: AudienceImport
