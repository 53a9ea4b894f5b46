"""JSON Lines result artifacts on the local file system and a formula-safe CSV export."""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ._enums import ItemState
from ._results import ArtifactRef, ItemResult

__all__ = [
    "CSV_BASE_COLUMNS",
    "JsonlArtifactSink",
    "csv_export",
    "export_jsonl_to_csv",
    "neutralize_csv_cell",
]

_MEDIA_TYPE = "application/x-ndjson"
_KINDS: Mapping[ItemState, str] = {
    ItemState.SUCCEEDED: "success",
    ItemState.FAILED: "failed",
    ItemState.UNKNOWN: "unknown",
    ItemState.UNSENT: "unsent",
    ItemState.SKIPPED: "skipped",
}
# Lines are buffered per file and written in chunks so memory stays constant and disk I/O stays coarse.
_FLUSH_BYTES = 64 * 1024


class _Output:
    __slots__ = ("buffer", "buffered", "path", "records", "size")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buffer: list[str] = []
        self.buffered = 0
        self.records = 0
        self.size = 0


class JsonlArtifactSink:
    """Writes ``success/failed/unknown/unsent/skipped.jsonl`` in a directory as results arrive.

    Files are created (truncated) on ``open``; ``close`` writes what is buffered and returns a reference for
    every non-empty file, deleting the empty ones.
    """

    def __init__(self, directory: Path | str) -> None:
        self._directory = Path(directory)
        self._outputs: dict[ItemState, _Output] = {}
        self._closed = False

    async def open(self) -> None:
        await asyncio.to_thread(self._create)

    def _create(self) -> None:
        self._directory.mkdir(parents=True, exist_ok=True)
        for state, kind in _KINDS.items():
            path = self._directory / f"{kind}.jsonl"
            path.write_bytes(b"")
            self._outputs[state] = _Output(path)

    async def write(self, item_result: ItemResult) -> None:
        output = self._outputs[item_result.state]
        line = item_result.to_json_line() + "\n"
        output.buffer.append(line)
        output.buffered += len(line)
        output.records += 1
        if output.buffered >= _FLUSH_BYTES:
            await self._flush(output)

    async def _flush(self, output: _Output) -> None:
        if not output.buffer:
            return
        data = "".join(output.buffer).encode("utf-8")
        output.buffer = []
        output.buffered = 0
        await asyncio.to_thread(_append, output.path, data)
        output.size += len(data)

    async def close(self) -> tuple[ArtifactRef, ...]:
        if self._closed:
            return ()
        self._closed = True
        refs: list[ArtifactRef] = []
        for output in self._outputs.values():
            await self._flush(output)
            if output.records == 0:
                await asyncio.to_thread(output.path.unlink, True)
                continue
            refs.append(
                ArtifactRef(
                    name=output.path.name,
                    kind=output.path.stem,
                    uri=output.path.resolve().as_uri(),
                    media_type=_MEDIA_TYPE,
                    size_bytes=output.size,
                    record_count=output.records,
                )
            )
        return tuple(refs)


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


# ASVS 5.0 V1.2.10 adds the NUL character to the classic list: some spreadsheets skip a leading one.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\0")

CSV_BASE_COLUMNS: tuple[str, ...] = (
    "itemId",
    "sequence",
    "state",
    "attempt",
    "errorCategory",
    "providerCode",
    "diagnostic",
    "externalRequestId",
    "startedAt",
    "finishedAt",
    "latencyMs",
)


def neutralize_csv_cell(value: Any) -> str:
    """Render a cell so a spreadsheet never evaluates it as a formula (leading apostrophe)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "'" + text if text.startswith(_FORMULA_PREFIXES) else text


def csv_export(
    results: Iterable[ItemResult | Mapping[str, Any] | str],
    out: TextIO,
    *,
    recipient_fields: Sequence[str] | None = None,
) -> int:
    """Stream item results (objects, ``item-result`` dicts or JSONL lines) as CSV; returns the row count.

    Recipient fields become ``recipient.<name>`` columns; without an explicit list, the first row's fields
    are used. Every text cell is neutralised against formula injection.
    """
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    fields: Sequence[str] | None = recipient_fields
    rows = 0
    for entry in results:
        row = _as_dict(entry)
        if fields is None:
            fields = sorted((row.get("recipient") or {}).keys())
        if rows == 0:
            writer.writerow([*CSV_BASE_COLUMNS, *(f"recipient.{name}" for name in fields)])
        recipient = row.get("recipient") or {}
        writer.writerow(
            [neutralize_csv_cell(row.get(column)) for column in CSV_BASE_COLUMNS]
            + [neutralize_csv_cell(recipient.get(name)) for name in fields]
        )
        rows += 1
    if rows == 0:
        writer.writerow([*CSV_BASE_COLUMNS, *(f"recipient.{name}" for name in (fields or ()))])
    return rows


def export_jsonl_to_csv(
    source: Path | str, destination: Path | str, *, recipient_fields: Sequence[str] | None = None
) -> int:
    """Convert one JSONL artifact to CSV line by line (constant memory). Blocking: run it in a thread."""
    with (
        Path(source).open(encoding="utf-8") as lines,
        Path(destination).open("w", encoding="utf-8", newline="") as out,
    ):
        return csv_export((line for line in lines if line.strip()), out, recipient_fields=recipient_fields)


def _as_dict(entry: ItemResult | Mapping[str, Any] | str) -> Mapping[str, Any]:
    if isinstance(entry, ItemResult):
        return entry.to_json_dict()
    if isinstance(entry, str):
        parsed = json.loads(entry)
        if not isinstance(parsed, dict):
            raise ValueError("an item-result line must hold a JSON object")
        return parsed
    return entry
