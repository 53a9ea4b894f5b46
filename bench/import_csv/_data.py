"""The benchmark's CSV: realistic recipients with a few rejected and duplicate rows mixed in."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

HEADER = ("mobile", "name", "email", "city")
CITIES = ("Shanghai", "Beijing", "Shenzhen", "Hangzhou", "Chengdu", "Wuhan")


def row(i: int) -> tuple[str, str, str, str]:
    """Every 1,000th row has no mobile number (rejected); every 1,000th + 500 repeats its predecessor's
    number (a duplicate). Every row has four columns, so PostgreSQL's COPY reads the same file."""
    mobile = "" if i % 1000 == 0 else f"1{(38000000000 + (i - 1 if i % 1000 == 500 else i)):010d}"
    return (mobile, f"Customer {i}", f"user{i}@example.com", CITIES[i % len(CITIES)])


def write_csv(path: Path, rows: int) -> Path:
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(row(i) for i in range(1, rows + 1))
    return path


def expected_counts(rows: int) -> dict[str, int]:
    rejected = rows // 1000
    duplicates = (rows + 500) // 1000
    return {
        "totalRows": rows,
        "acceptedRows": rows - rejected - duplicates,
        "rejectedRows": rejected,
        "duplicateRows": duplicates,
    }


def staging_tuples(path: Path, batch: int) -> Iterator[list[tuple[object, ...]]]:
    """The file's rows shaped like ``audience_import_row`` rows, ``batch`` at a time (for the baselines)."""
    with path.open(encoding="utf-8", newline="") as source:
        reader = csv.reader(source)
        next(reader)
        chunk: list[tuple[object, ...]] = []
        for line, (mobile, name, email, city) in enumerate(reader, start=2):
            fields = json.dumps(
                {"city": city, "email": email, "mobile": mobile, "name": name}, separators=(",", ":")
            )
            chunk.append(
                ("bench-import", line, mobile or f"line-{line}", fields, "ACCEPTED", None, None, None)
            )
            if len(chunk) == batch:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
