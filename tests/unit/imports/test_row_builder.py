"""Row checks: every data record becomes one accepted or rejected staging row with a stable code."""

from __future__ import annotations

from typing import Any

import pytest

from wepush.server.application._deps import ImportLimits
from wepush.server.application._import_errors import HeaderRejected, ImportLimitError
from wepush.server.application._import_parser import ParsedRecord
from wepush.server.application._import_rows import MAX_RAW_CHARS, RowBuilder
from wepush.server.application._import_settings import ImportSettings
from wepush.server.domain import ImportFormat, StagedRowStatus

LIMITS = ImportLimits(max_bytes=1 << 30, max_rows=1000, max_columns=4, max_field_length=10)


def record(line: int, *values: str, problem: str | None = None) -> ParsedRecord:
    return ParsedRecord(line, list(values), ",".join(values) + "\n", problem)


def builder(**settings: Any) -> RowBuilder:
    options: dict[str, Any] = {
        "format": ImportFormat.CSV,
        "field_mapping": {"Mobile": "mobile", "Name": "name"},
    }
    options.update(settings)
    built = RowBuilder(ImportSettings(**options), LIMITS)
    if built.awaiting_header:
        built.header(record(1, "Mobile", " Name ", "Extra"))
    return built


def test_an_accepted_row_carries_mapped_fields_in_file_order_and_its_item_id() -> None:
    rows = builder(item_id_field="mobile")
    row = rows.build(record(2, "138001", "Ann", "ignored"))
    assert row.status is StagedRowStatus.ACCEPTED
    assert row.item_key == "138001"
    assert row.fields == {"mobile": "138001", "name": "Ann"}
    assert rows.fields == ["mobile", "name"]
    assert rows.source_columns == ["Mobile", "Name", "Extra"]


@pytest.mark.parametrize(
    ("values", "code"),
    [
        (("138001", "Ann"), "COLUMN_COUNT"),
        (("138001", "Ann", "x", "y"), "COLUMN_COUNT"),
        (("138001", "A" * 11, "x"), "FIELD_TOO_LONG"),
        (("", "Ann", "x"), "MISSING_FIELD"),
    ],
)
def test_bad_rows_are_rejected_with_a_stable_code_and_their_raw_line(
    values: tuple[str, ...], code: str
) -> None:
    row = builder(item_id_field="mobile").build(record(5, *values))
    assert row.status is StagedRowStatus.REJECTED
    assert row.reason_code == code
    assert row.raw == ",".join(values)
    assert row.reason
    if code == "COLUMN_COUNT":
        assert row.reason == f"the line has {len(values)} columns; the header has 3"


def test_parser_problems_become_rejections_with_readable_reasons() -> None:
    row = builder().build(ParsedRecord(3, None, '"x"y,1\n', "MALFORMED_CSV"))
    assert (row.reason_code, row.raw) == ("MALFORMED_CSV", '"x"y,1')
    encoded = builder().build(ParsedRecord(4, ["\udcff", "b", "c"], "\udcff,b,c\n", "INVALID_ENCODING"))
    assert encoded.reason_code == "INVALID_ENCODING"
    assert encoded.raw == "\ufffd,b,c"
    assert (
        encoded.reason
        == "the line is not valid utf-8; spreadsheet programs on Chinese systems usually save gb18030"
    )


def test_raw_text_is_truncated_for_storage() -> None:
    row = builder().build(ParsedRecord(2, None, "x" * (MAX_RAW_CHARS + 50), "MALFORMED_CSV"))
    assert row.raw is not None
    assert len(row.raw) == MAX_RAW_CHARS


def test_composite_dedupe_keys_make_one_item_id_and_all_parts_are_required() -> None:
    rows = builder(dedupe_keys=("mobile", "name"))
    assert rows.build(record(2, "138", "Ann", "x")).item_key == '["138","Ann"]'
    assert rows.build(record(3, "138", "", "x")).reason_code == "MISSING_FIELD"


def test_composite_dedupe_keys_longer_than_an_item_id_are_known_by_their_digest() -> None:
    """Each key within the field limit, together past 256 characters: accepted, not ITEM_ID_TOO_LONG,
    and the same keys still make the same item id (so duplicates are still found)."""
    wide = ImportLimits(max_bytes=1 << 30, max_rows=1000, max_columns=4, max_field_length=200)
    settings = ImportSettings(
        format=ImportFormat.CSV,
        field_mapping={"Mobile": "mobile", "Name": "name"},
        dedupe_keys=("mobile", "name"),
    )
    rows = RowBuilder(settings, wide)
    rows.header(record(1, "Mobile", "Name", "Extra"))
    first = rows.build(record(2, "m" * 150, "安" * 150, "x"))
    again = rows.build(record(3, "m" * 150, "安" * 150, "y"))
    other = rows.build(record(4, "m" * 150, "安" * 149, "x"))
    assert first.status is StagedRowStatus.ACCEPTED
    assert first.item_key is not None
    assert first.item_key.startswith("sha256:")
    assert len(first.item_key) == len("sha256:") + 64
    assert again.item_key == first.item_key
    assert other.item_key != first.item_key


def test_without_identity_each_row_is_its_own_recipient_but_empty_rows_are_rejected() -> None:
    rows = builder()
    assert rows.build(record(7, "138", "", "x")).item_key == "line-7"
    assert rows.build(record(8, "", "", "x")).reason_code == "MISSING_FIELD"


def test_without_header_columns_are_positions_taken_from_the_first_row() -> None:
    rows = builder(has_header=False, field_mapping={"2": "mobile"}, item_id_field="mobile")
    assert rows.build(record(1, "Ann", "138")).fields == {"mobile": "138"}
    assert rows.source_columns == ["1", "2"]
    short = rows.build(record(2, "Bob"))
    assert (short.reason_code, short.reason) == ("COLUMN_COUNT", "the line has 1 column; the first row has 2")


def test_a_header_missing_a_mapped_column_fails_the_import() -> None:
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"Phone": "mobile"}), LIMITS)
    with pytest.raises(HeaderRejected, match="Phone"):
        rows.header(record(1, "Mobile", "Name"))


def test_the_failure_names_the_columns_the_header_does_have() -> None:
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"Phone": "mobile"}), LIMITS)
    with pytest.raises(HeaderRejected) as failed:
        rows.header(record(1, "Mobile", "Name"))
    assert str(failed.value) == (
        "the mapped column 'Phone' is not in the header; it has 2 columns: 'Mobile', 'Name'"
    )


@pytest.mark.parametrize(("header", "found"), [("mobile;name", "';'"), ("mobile\tname", "'\\t'")])
def test_a_header_split_on_the_wrong_delimiter_says_which_one_the_file_seems_to_use(
    header: str, found: str
) -> None:
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"mobile": "mobile"}), LIMITS)
    with pytest.raises(HeaderRejected) as failed:
        rows.header(record(1, header))
    assert f"(the file looks {found}-separated; this import splits on ',')" in str(failed.value)


def test_a_wide_header_is_summarised_in_the_failure() -> None:
    limits = ImportLimits(max_bytes=1 << 30, max_rows=1000, max_columns=100, max_field_length=10)
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"Phone": "mobile"}), limits)
    with pytest.raises(HeaderRejected) as failed:
        rows.header(record(1, *(f"c{i}" for i in range(20))))
    assert str(failed.value).endswith(
        "it has 20 columns: 'c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7' and 12 more"
    )


def test_a_mapped_column_repeated_in_the_header_fails_the_import() -> None:
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}), LIMITS)
    with pytest.raises(HeaderRejected, match="more than once"):
        rows.header(record(1, "Mobile", "Mobile"))


def test_a_header_wider_than_the_column_limit_is_a_limit_error() -> None:
    rows = RowBuilder(ImportSettings(format=ImportFormat.CSV, field_mapping={"a": "a"}), LIMITS)
    with pytest.raises(ImportLimitError, match="at most 4"):
        rows.header(record(1, "a", "b", "c", "d", "e"))
