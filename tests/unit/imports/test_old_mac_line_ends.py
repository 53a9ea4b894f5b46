"""A file whose lines end in a carriage return alone fails whatever its format and header, and only then."""

from __future__ import annotations

import pytest

from tests.unit.imports.test_record_reader import read
from wepush.server.application._import_errors import ContentRejected
from wepush.server.application._import_parser import LONE_CR_HINT
from wepush.server.domain import ImportFormat

CSV = ImportFormat.CSV
TXT = ImportFormat.TXT


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        (b"13800000001\r13800000002\r13800000003\r", TXT),
        (b"mobile\r13800000001\r13800000002\r", TXT),
        (b"1,a\r2,b\r3,c\r", CSV),
        (b"mobile,name\r13800000001,Ann\r13800000002,Bob\r", CSV),
        (b'"1","a"\r"2","b"', CSV),  # quoted values, and no line break after the last line
        (b'1,"a\rb"\r2,c\r', CSV),  # a carriage return inside quotes, then ones that end lines
    ],
)
@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_a_file_of_lines_ending_in_a_carriage_return_alone_fails_saying_so(
    data: bytes, fmt: ImportFormat, chunk: int
) -> None:
    with pytest.raises(ContentRejected) as refused:
        read(data, chunk=chunk, fmt=fmt)

    assert str(refused.value) == f"the whole file reads as one line; {LONE_CR_HINT}"


@pytest.mark.parametrize(
    ("data", "fmt", "values"),
    [
        (b"13800000001\r\n13800000002\r\n", TXT, [["13800000001"], ["13800000002"]]),
        (b"13800000001", TXT, [["13800000001"]]),
        (b"13800000001\r", TXT, [["13800000001"]]),
        (b"a,b\r\n1,2\r\n", CSV, [["a", "b"], ["1", "2"]]),
        (b'1,"x\ry"', CSV, [["1", "x\ry"]]),  # one line, its carriage return quoted
        (b'1,"x\ry"\r', CSV, [["1", "x\ry"]]),
        (b'a,b\n1,"x\ry"\n', CSV, [["a", "b"], ["1", "x\ry"]]),
    ],
    ids=["crlf-txt", "one-line", "one-line-cr", "crlf-csv", "quoted-cr", "quoted-cr-ended", "lf-quoted-cr"],
)
@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_files_with_line_feeds_or_only_quoted_carriage_returns_are_read(
    data: bytes, fmt: ImportFormat, values: list[list[str]], chunk: int
) -> None:
    assert [r.values for r in read(data, chunk=chunk, fmt=fmt)] == values
