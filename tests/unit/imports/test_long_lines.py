"""The line-length limit holds whatever pieces the upload arrives in: one piece or many, the same outcome."""

from __future__ import annotations

import pytest

from tests.unit.imports.test_record_reader import read
from wepush.server.application._import_parser import RecordTooLong
from wepush.server.domain import ImportFormat

LIMIT = 1024
#: One piece for the whole file, pieces of one byte, odd pieces, and pieces around the limit itself.
PIECES = [1 << 20, 1, 7, 1000, LIMIT + 1]


def _outcome(data: bytes, chunk: int, fmt: ImportFormat = ImportFormat.CSV) -> str:
    try:
        records = read(data, chunk=chunk, fmt=fmt, max_record_chars=LIMIT)
    except RecordTooLong as too_long:
        return f"413: {too_long}"
    return f"{len(records)} records"


@pytest.mark.parametrize(
    ("data", "fmt", "expected"),
    [
        (b"id,name\n1," + b"x" * 3000 + b"\n2,b\n", ImportFormat.CSV, "413: line 2 is longer than 1024"),
        (b"1\n" + b"9" * 3000 + b"\n3\n", ImportFormat.TXT, "413: line 2 is longer than 1024"),
        (b"a,b\n" * 300 + b"1," + b"x" * 3000, ImportFormat.CSV, "413: line 301 is longer than 1024"),
        (b'a,b\n1,"' + b"line\n" * 300 + b'"\n2,c\n', ImportFormat.CSV, "413: line 2 is longer than 1024"),
        (b'a,b\n1,"' + b"line\n" * 300 + b'"x\n2,c\n', ImportFormat.CSV, "413: line 2 is longer than 1024"),
        (b"a,b\n1," + b"x" * (LIMIT - 2) + b"\n2,c\n", ImportFormat.CSV, "3 records"),
        (b"a,b\n1," + b"x" * (LIMIT - 3) + b"\r\n2,c\n", ImportFormat.CSV, "3 records"),
        (b"a,b\n1," + b"x" * (LIMIT - 2) + b"\r\n2,c\n", ImportFormat.CSV, "413: line 2 is longer than 1024"),
    ],
    ids=[
        "csv",
        "txt",
        "last-line",
        "multi-line-record",
        "malformed-record",
        "at-limit",
        "at-limit-crlf",
        "over-limit-crlf",
    ],
)
def test_a_line_over_the_limit_fails_the_same_in_one_piece_and_in_many(
    data: bytes, fmt: ImportFormat, expected: str
) -> None:
    outcomes = {chunk: _outcome(data, chunk, fmt) for chunk in PIECES}

    assert set(outcomes.values()) == {outcomes[PIECES[0]]}, outcomes
    assert outcomes[PIECES[0]].startswith(expected)
