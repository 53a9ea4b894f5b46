"""JSON Lines artifacts and the formula-safe CSV export."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from wepush.agent.engine import (
    ErrorCategory,
    ItemResult,
    ItemState,
    JsonlArtifactSink,
    RecipientRecord,
    csv_export,
    export_jsonl_to_csv,
    neutralize_csv_cell,
)


def _result(n: int, state: ItemState = ItemState.SUCCEEDED, **fields: object) -> ItemResult:
    values = {"address": f"u{n}@example.test", **fields}
    return ItemResult(
        run_id="r",
        item_id=f"i-{n}",
        sequence=n,
        state=state,
        attempt=1,
        error_category=ErrorCategory.RECIPIENT_INVALID if state is ItemState.FAILED else None,
        recipient=RecipientRecord.of(f"i-{n}", n, values).fields,
    )


@pytest.mark.parametrize(
    ("raw", "cell"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1-555", "'+1-555"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("\0=1+1", "'\0=1+1"),
        ("plain", "plain"),
        ("a=b", "a=b"),
        (-5, "-5"),
        (None, ""),
        (True, "true"),
    ],
)
def test_csv_cells_that_a_spreadsheet_would_evaluate_get_a_leading_apostrophe(raw: object, cell: str) -> None:
    assert neutralize_csv_cell(raw) == cell


def test_csv_export_neutralises_recipient_fields_and_diagnostics() -> None:
    out = io.StringIO()
    rows = [
        _result(1, name="=cmd|' /C calc'!A0"),
        ItemResult("r", "i-2", 2, ItemState.FAILED, 1, diagnostic="@evil", recipient={}),
    ]
    assert csv_export(rows, out, recipient_fields=["address", "name"]) == 2
    table = list(csv.reader(io.StringIO(out.getvalue())))
    header = table[0]
    assert header[-2:] == ["recipient.address", "recipient.name"]
    assert table[1][header.index("recipient.name")] == "'=cmd|' /C calc'!A0"
    assert table[2][header.index("diagnostic")] == "'@evil"
    assert table[2][header.index("recipient.address")] == ""


def test_csv_export_of_nothing_still_writes_the_header() -> None:
    out = io.StringIO()
    assert csv_export([], out) == 0
    assert next(csv.reader(io.StringIO(out.getvalue())))[:3] == ["itemId", "sequence", "state"]


def test_csv_export_quotes_every_cell_so_no_delimiter_splits_one() -> None:
    # Spreadsheets set to split on ";" would otherwise cut "b;@SUM(1)" in two and evaluate the second half.
    out = io.StringIO()
    csv_export([{"itemId": "b;@SUM(1)", "sequence": 1, "recipient": {"name": "x;=1+1"}}], out)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith('"b;@SUM(1)","1",')
    assert lines[1].endswith(',"x;=1+1"')


async def test_jsonl_sink_routes_by_outcome_and_flushes_in_chunks(tmp_path: Path) -> None:
    sink = JsonlArtifactSink(tmp_path / "artifacts")
    await sink.open()
    for n in range(1, 3001):
        await sink.write(_result(n, ItemState.FAILED if n % 3 == 0 else ItemState.SUCCEEDED))
    # Lines are written as they go: most of the success file is on disk before close.
    assert (tmp_path / "artifacts" / "success.jsonl").stat().st_size > 0
    refs = {ref.kind: ref for ref in await sink.close()}
    assert set(refs) == {"success", "failed"}
    assert refs["failed"].record_count == 1000
    assert refs["success"].record_count == 2000
    assert refs["success"].uri.startswith("file://")
    lines = (tmp_path / "artifacts" / "failed.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1000
    assert json.loads(lines[0])["state"] == "FAILED"
    assert await sink.close() == ()


async def test_a_jsonl_artifact_converts_to_csv_line_by_line(tmp_path: Path) -> None:
    sink = JsonlArtifactSink(tmp_path)
    await sink.open()
    await sink.write(_result(1, name="+danger"))
    await sink.close()
    count = export_jsonl_to_csv(tmp_path / "success.jsonl", tmp_path / "success.csv")
    assert count == 1
    table = list(csv.reader(io.StringIO((tmp_path / "success.csv").read_text(encoding="utf-8"))))
    assert table[1][table[0].index("recipient.name")] == "'+danger"
