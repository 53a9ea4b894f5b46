"""The streaming reader: records are the same whatever the chunk boundaries, and bad bytes stay local."""

from __future__ import annotations

import codecs

import pytest

from wepush.server.application._import_errors import ContentRejected
from wepush.server.application._import_parser import ParsedRecord, RecordReader, RecordTooLong
from wepush.server.domain import ImportFormat


def read(
    data: bytes,
    *,
    chunk: int,
    fmt: ImportFormat = ImportFormat.CSV,
    delimiter: str = ",",
    encoding: str = "utf-8",
    max_record_chars: int = 1 << 20,
) -> list[ParsedRecord]:
    reader = RecordReader(
        format=fmt, delimiter=delimiter, encoding=encoding, max_record_chars=max_record_chars
    )
    records: list[ParsedRecord] = []
    for start in range(0, len(data), chunk):
        records.extend(reader.feed(data[start : start + chunk]))
    records.extend(reader.finish())
    return records


SAMPLE = (
    'mobile,name\r\n13800000001,"Ann ""the first"""\r\n\r\n13800000002,"two\nline\nname"\n'
    "13800000003,Zoë\n13800000004,no newline at end"
).encode()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 16])
def test_records_do_not_depend_on_chunk_boundaries(chunk: int) -> None:
    records = read(SAMPLE, chunk=chunk)
    assert [(r.line_number, r.values, r.problem) for r in records] == [
        (1, ["mobile", "name"], None),
        (2, ["13800000001", 'Ann "the first"'], None),
        (4, ["13800000002", "two\nline\nname"], None),
        (7, ["13800000003", "Zoë"], None),
        (8, ["13800000004", "no newline at end"], None),
    ]
    assert records[2].raw == '13800000002,"two\nline\nname"\n'


def test_an_invalid_byte_marks_only_its_own_record() -> None:
    records = read(b"a,b\n1,\xff\xfe\n2,ok\n", chunk=3)
    assert [(r.line_number, r.problem) for r in records] == [(1, None), (2, "INVALID_ENCODING"), (3, None)]


def test_a_multibyte_character_split_across_chunks_is_decoded() -> None:
    records = read("x\n名前\n".encode(), chunk=1)
    assert [r.values for r in records] == [["x"], ["名前"]]
    assert all(r.problem is None for r in records)


def test_nul_characters_are_flagged_because_no_database_stores_them() -> None:
    [record] = read(b"a\x00b,c\n", chunk=100)
    assert record.problem == "INVALID_CHARACTER"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gb18030", "utf-16"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 100])
def test_a_leading_byte_order_mark_is_dropped_whatever_the_encoding(encoding: str, chunk: int) -> None:
    # What spreadsheet programs write before a "CSV UTF-8" file; kept, it would rename the first column.
    text = "mobile,name\n1,\ufeffx\n"
    # utf-8-sig and utf-16 write the mark themselves; the others encode U+FEFF as their own signature.
    writes_mark = encoding in {"utf-8-sig", "utf-16"}
    data = text.encode(encoding) if writes_mark else ("\ufeff" + text).encode(encoding)
    records = read(data, chunk=chunk, encoding=encoding)
    assert [r.values for r in records] == [["mobile", "name"], ["1", "\ufeffx"]]


def test_only_the_first_byte_order_mark_is_a_signature() -> None:
    data = b"\xef\xbb\xbf\xef\xbb\xbfmobile\n"
    assert read(data, chunk=1, encoding="utf-8")[0].values == ["\ufeffmobile"]
    assert read(data, chunk=1, encoding="utf-8-sig")[0].values == ["\ufeffmobile"]


GB18030_SAMPLE = '手机,姓名,城市\r\n13800000001,张三,北京\r\n13800000002,"李四，\n第二行",上海\r\n'.encode(
    "gb18030"
)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 1 << 16])
def test_gb18030_files_decode_to_unicode_whatever_the_chunk_boundaries(chunk: int) -> None:
    # Every Chinese character here is two bytes: chunks of odd sizes cut through them.
    records = read(GB18030_SAMPLE, chunk=chunk, encoding="gb18030")
    assert [(r.line_number, r.values, r.problem) for r in records] == [
        (1, ["手机", "姓名", "城市"], None),
        (2, ["13800000001", "张三", "北京"], None),
        (3, ["13800000002", "李四，\n第二行", "上海"], None),
    ]


def test_a_byte_gb18030_cannot_decode_marks_only_its_own_record() -> None:
    data = "a,b\n".encode("gb18030") + b"1,\x81\x20x\n" + "2,王五\n".encode("gb18030")
    records = read(data, chunk=2, encoding="gb18030")
    assert [(r.line_number, r.problem) for r in records] == [(1, None), (2, "INVALID_ENCODING"), (3, None)]
    assert records[2].values == ["2", "王五"]


def test_the_same_gbk_bytes_read_as_utf8_are_invalid() -> None:
    records = read(GB18030_SAMPLE, chunk=1 << 16)
    assert {r.problem for r in records} == {"INVALID_ENCODING"}


#: What Excel saves as "Unicode Text": UTF-16 with a byte-order mark, tab-separated, CRLF line ends.
UNICODE_TEXT = '手机\t姓名\r\n13800000001\t张三\r\n13800000002\t"李四\n第二行"\r\n13800000003\t😀\r\n'
UNICODE_TEXT_ROWS = [
    (1, ["手机", "姓名"], None),
    (2, ["13800000001", "张三"], None),
    (3, ["13800000002", "李四\n第二行"], None),
    (5, ["13800000003", "😀"], None),
]


@pytest.mark.parametrize(
    "data",
    [
        codecs.BOM_UTF16_LE + UNICODE_TEXT.encode("utf-16-le"),
        codecs.BOM_UTF16_BE + UNICODE_TEXT.encode("utf-16-be"),
        UNICODE_TEXT.encode("utf-16-le"),
    ],
    ids=["little-endian-mark", "big-endian-mark", "no-mark-read-little-endian"],
)
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 1 << 16])
def test_utf16_files_decode_in_the_byte_order_their_mark_gives(data: bytes, chunk: int) -> None:
    # Odd chunk sizes cut through the mark, through code units and through the emoji's surrogate pair.
    records = read(data, chunk=chunk, delimiter="\t", encoding="utf-16")
    assert [(r.line_number, r.values, r.problem) for r in records] == UNICODE_TEXT_ROWS


#: A TXT export of numbers: no header, so nothing but its first characters tells its encoding.
NUMBERS = "13800000001\r\n13800000002\r\n"


@pytest.mark.parametrize("order", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_unmarked_utf16_is_read_in_the_byte_order_its_first_characters_show(order: str, chunk: int) -> None:
    records = read(NUMBERS.encode(order), chunk=chunk, fmt=ImportFormat.TXT, encoding="utf-16")
    assert [(r.values, r.problem) for r in records] == [(["13800000001"], None), (["13800000002"], None)]


def test_unmarked_utf16_starting_with_cjk_stays_little_endian() -> None:
    # 一 (U+4E00) has a zero low byte, so its little-endian bytes 00 4E look big-endian on their own;
    # only two such characters in a row would read as big-endian.
    records = read("一二\n".encode("utf-16-le"), chunk=1, fmt=ImportFormat.TXT, encoding="utf-16")
    assert [r.values for r in records] == [["一二"]]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gb18030"])
@pytest.mark.parametrize("order", ["utf-16-le", "utf-16-be"])
def test_unmarked_utf16_read_with_another_encoding_is_refused_naming_utf16(encoding: str, order: str) -> None:
    with pytest.raises(
        ContentRejected, match=f"UTF-16 without a byte-order mark .*, not {encoding}: .*utf-16$"
    ):
        read(NUMBERS.encode(order), chunk=2, fmt=ImportFormat.TXT, encoding=encoding)


@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_what_utf16_cannot_decode_marks_only_its_own_record(chunk: int) -> None:
    # A lone high surrogate on line 2 (followed by an ASCII code unit) and a last byte without its pair.
    data = (
        codecs.BOM_UTF16_LE
        + "a,b\n1,".encode("utf-16-le")
        + b"\x00\xd8"
        + "x\n2,ok\n3,".encode("utf-16-le")
        + b"y"
    )
    records = read(data, chunk=chunk, encoding="utf-16")
    assert [(r.line_number, r.problem) for r in records] == [
        (1, None),
        (2, "INVALID_ENCODING"),
        (3, None),
        (4, "INVALID_ENCODING"),
    ]
    assert records[2].values == ["2", "ok"]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "gb18030"])
@pytest.mark.parametrize("mark", [codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE])
def test_a_utf16_file_read_with_another_encoding_is_refused_naming_utf16(encoding: str, mark: bytes) -> None:
    data = mark + "mobile\n1\n".encode("utf-16-le" if mark == codecs.BOM_UTF16_LE else "utf-16-be")
    with pytest.raises(ContentRejected, match=f"the file is UTF-16 .*, not {encoding}: .*encoding utf-16"):
        read(data, chunk=1, encoding=encoding)


def test_a_file_of_one_byte_is_read_whatever_the_encoding() -> None:
    # Too short to hold a byte-order mark: the decoder is chosen when the file ends.
    assert [r.values for r in read(b"7", chunk=1, fmt=ImportFormat.TXT)] == [["7"]]
    assert [r.problem for r in read(b"7", chunk=1, fmt=ImportFormat.TXT, encoding="utf-16")] == [
        "INVALID_ENCODING"
    ]


def test_malformed_quotes_reject_the_record_and_reading_continues() -> None:
    records = read(b'a,b\n"x"y,1\n2,3\n', chunk=4)
    assert [(r.line_number, r.values, r.problem) for r in records] == [
        (1, ["a", "b"], None),
        (2, None, "MALFORMED_CSV"),
        (3, ["2", "3"], None),
    ]


@pytest.mark.parametrize("chunk", [5, 1 << 16])
def test_a_quote_never_closed_fails_the_file_instead_of_swallowing_the_lines_after_it(chunk: int) -> None:
    with pytest.raises(ContentRejected) as refused:
        read(b'a,b\n1,"open\n2,3\n4,5\n', chunk=chunk)
    assert str(refused.value) == (
        "line 2 opens a quoted field that is never closed, so the 2 lines after it would all be part of "
        "one value: close the quote (a quote inside a field is written twice) and start a new import"
    )


def test_a_quote_never_closed_on_the_last_line_rejects_only_that_line() -> None:
    records = read(b'a,b\n1,2\n3,"open', chunk=5)
    assert [(r.line_number, r.problem) for r in records] == [(1, None), (2, None), (3, "MALFORMED_CSV")]
    assert records[2].raw == '3,"open\n'


@pytest.mark.parametrize("chunk", [4096, 1 << 16])
def test_a_quoted_value_longer_than_csvs_default_limit_stays_one_record(chunk: int) -> None:
    """csv's default field limit (128 Ki characters) used to end the value early and read the lines
    inside it as records: a phone number in a note became a recipient."""
    note = "x" * 140_000 + "\n13900000009,Mallory,injected\nend of note"
    data = f'mobile,name,note\n13800000001,Ann,"{note}"\n13800000002,Bob,ok\n'.encode()
    records = read(data, chunk=chunk, max_record_chars=1 << 20)
    assert [(r.line_number, r.problem) for r in records] == [(1, None), (2, None), (5, None)]
    assert records[1].values == ["13800000001", "Ann", note]
    assert records[2].values == ["13800000002", "Bob", "ok"]


def test_other_delimiters_are_honoured() -> None:
    assert read(b"a;b\n1;2\n", chunk=3, delimiter=";")[1].values == ["1", "2"]


def test_txt_lines_are_single_stripped_values_and_blank_lines_are_skipped() -> None:
    records = read(b"  13800000001 \r\n\n13800000002\n,not,split\n", chunk=4, fmt=ImportFormat.TXT)
    assert [(r.line_number, r.values) for r in records] == [
        (1, ["13800000001"]),
        (3, ["13800000002"]),
        (4, [",not,split"]),
    ]


def test_a_line_longer_than_the_bound_stops_the_import_instead_of_buffering() -> None:
    with pytest.raises(RecordTooLong):
        read(b"a,b\n" + b"x" * 5000, chunk=512, max_record_chars=1024)


def test_a_file_whose_lines_end_in_a_carriage_return_alone_is_told_so() -> None:
    old_mac = b"mobile,name\r" + b"13800000001,Ann\r" * 100
    with pytest.raises(RecordTooLong, match=r"line 1 .*old Mac line ends"):
        read(old_mac, chunk=512, max_record_chars=1024)
    # A line that is only long says nothing of line ends.
    with pytest.raises(RecordTooLong) as long_line:
        read(b"a,b\n" + b"x" * 5000, chunk=512, max_record_chars=1024)
    assert "Mac" not in str(long_line.value)


def test_an_unfinished_multi_line_record_is_bounded_too() -> None:
    with pytest.raises(RecordTooLong):
        read(b'a,"' + b"line\n" * 1000 + b'"\n', chunk=256, max_record_chars=1024)


CHINESE_NAMES = "mobile,name\n13800000001,张三\n13800000002,李四\n"


@pytest.mark.parametrize("chunk", [1, 5, 1 << 16])
@pytest.mark.parametrize("encoded", [CHINESE_NAMES.encode(), CHINESE_NAMES.encode("utf-8-sig")])
def test_utf8_read_as_gb18030_is_refused_naming_utf8(encoded: bytes, chunk: int) -> None:
    # Read as GB18030 these bytes are valid too: 张三 would become 寮犱笁 in every accepted row.
    with pytest.raises(
        ContentRejected, match=r"UTF-8 .*, not gb18030: start a new import with encoding utf-8"
    ):
        read(encoded, chunk=chunk, encoding="gb18030")


@pytest.mark.parametrize("chunk", [1, 5, 1 << 16])
def test_gbk_read_as_gb18030_is_released_at_its_first_chinese_character(chunk: int) -> None:
    records = read(CHINESE_NAMES.encode("gbk"), chunk=chunk, encoding="gb18030")

    assert [r.values for r in records][1:] == [["13800000001", "张三"], ["13800000002", "李四"]]


def test_utf8_after_a_long_ascii_start_still_fails_a_gb18030_import() -> None:
    ascii_rows = "".join(f"1380000{n:04d},Ann\n" for n in range(6000)).encode()  # > 64 KiB held back
    tail = "13900000001,张三\n13900000002,李四\n".encode()

    with pytest.raises(ContentRejected, match="reads as UTF-8"):
        read(b"mobile,name\n" + ascii_rows + tail, chunk=4096, encoding="gb18030")
    ascii_only = read(b"mobile,name\n" + ascii_rows, chunk=4096, encoding="gb18030")
    assert len(ascii_only) == 6001


def test_one_utf8_character_is_too_little_evidence_and_stays_a_rejected_row() -> None:
    # Three non-ASCII bytes prove nothing; decoded as GB18030 they leave a byte that rejects the row.
    records = read("mobile,name\n13800000001,张\n".encode(), chunk=3, encoding="gb18030")

    assert records[-1].problem == "INVALID_ENCODING"
