"""A UTF-8 or GB18030 file in a utf-16 import fails naming its encoding instead of being read as garble."""

from __future__ import annotations

import codecs

import pytest

from tests.unit.imports.test_record_reader import read
from wepush.server.application._import_errors import ContentRejected
from wepush.server.domain import ImportFormat

TXT = ImportFormat.TXT
NUMBERS = "13800000001\n13800000002\n"
NOT_UTF16 = r"^the file is not UTF-16 \(its start has no NUL byte, .*\): start a new import with encoding "


@pytest.mark.parametrize(
    ("data", "fmt", "named"),
    [
        (NUMBERS.encode(), TXT, "utf-8"),
        (b"1\n", TXT, "utf-8"),  # a line break with no NUL beside it
        (b"13800000001", TXT, "utf-8"),  # no line break, but more than a few bytes
        (codecs.BOM_UTF8 + "手机,姓名\n13800000001,张三\n".encode(), ImportFormat.CSV, "utf-8"),
        ("手机,姓名\r\n13800000001,张三\r\n".encode("gbk"), ImportFormat.CSV, "gb18030"),
    ],
    ids=["numbers", "short-line", "no-line-break", "utf8-mark", "gbk"],
)
@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_a_file_without_nul_bytes_in_a_utf16_import_fails_naming_its_encoding(
    data: bytes, fmt: ImportFormat, named: str, chunk: int
) -> None:
    with pytest.raises(ContentRejected, match=NOT_UTF16 + f"{named}$"):
        read(data, chunk=chunk, fmt=fmt, encoding="utf-16")


@pytest.mark.parametrize("chunk", [1000, 1 << 20])
def test_only_the_first_64_kib_decide_however_the_file_arrives(chunk: int) -> None:
    # A NUL byte after the look-ahead proves nothing about the start read as UTF-16.
    data = b"13800000001\n" * 6000 + b"\x00\n"
    with pytest.raises(ContentRejected, match=NOT_UTF16 + "utf-8$"):
        read(data, chunk=chunk, fmt=TXT, encoding="utf-16")


@pytest.mark.parametrize(
    "data",
    [
        NUMBERS.encode("utf-16-le"),
        NUMBERS.encode("utf-16-be"),
        codecs.BOM_UTF16_LE + NUMBERS.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + NUMBERS.encode("utf-16-be"),
    ],
    ids=["le", "be", "le-mark", "be-mark"],
)
@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_genuine_utf16_is_read_with_or_without_its_mark(data: bytes, chunk: int) -> None:
    records = read(data, chunk=chunk, fmt=TXT, encoding="utf-16")
    assert [r.values for r in records] == [["13800000001"], ["13800000002"]]


@pytest.mark.parametrize(
    ("data", "values"),
    [
        # Chinese text alone has no NUL byte in UTF-16: the byte-order mark is trusted...
        (codecs.BOM_UTF16_LE + "张三李四王五".encode("utf-16-le"), [["张三李四王五"]]),
        (codecs.BOM_UTF16_BE + "张三李四王五".encode("utf-16-be"), [["张三李四王五"]]),
        # ...and without one, a file of a few bytes proves nothing.
        ("张三".encode("utf-16-le"), [["张三"]]),
    ],
    ids=["le-mark", "be-mark", "short"],
)
def test_utf16_text_without_nul_bytes_is_read_when_its_mark_says_so_or_it_is_tiny(
    data: bytes, values: list[list[str]]
) -> None:
    assert [r.values for r in read(data, chunk=1, fmt=TXT, encoding="utf-16")] == values
