"""The bulk path for lines that need no CSV parsing gives exactly the staged records of the general path.

Each case is a generated file read twice, once record by record (``feed``) and once in blocks
(``feed_block``), in random chunk sizes; the staged records (line numbers, keys, canonical field JSON,
statuses, codes, reasons, raw text) must be identical, whatever mix of plain and quoted blocks occurs.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from wepush.server.application._deps import ImportLimits
from wepush.server.application._import_errors import HeaderRejected
from wepush.server.application._import_parser import PlainLines, RecordReader
from wepush.server.application._import_rows import RowBuilder
from wepush.server.application._import_settings import ImportSettings
from wepush.server.domain import ImportFormat, StagedRecord

LIMITS = ImportLimits(max_bytes=1 << 30, max_rows=1_000_000, max_columns=8, max_field_length=12)
IMPORT_ID = "import-1"
# Values that exercise splitting and JSON escaping: spaces, tabs, control and non-ASCII characters,
# backslashes, a JSON-looking value, empties, a percent sign (the JSON template uses %-formatting).
VALUES = ["", " ", "a", "138001", "Zoë", "名字", "tab\there", "back\\slash", "{}", "%s%%", "\x01", "x" * 13]
# Values no JSON string escapes, so whole blocks take the verbatim encoding.
VERBATIM_VALUES = ["", " ", "a", "138001", "Zoë", "名字", "{}", "%s%%", "\x7f", "x" * 13]


def _stage(
    content: bytes, settings: ImportSettings, *, plain: bool, rng: random.Random
) -> list[StagedRecord]:
    reader = RecordReader(
        format=settings.format,
        delimiter=settings.delimiter,
        encoding=settings.encoding,
        max_record_chars=64 * 1024,
    )
    feed, finish = (reader.feed_block, reader.finish_block) if plain else (reader.feed, reader.finish)
    builder = RowBuilder(settings, LIMITS)
    out: list[StagedRecord] = []
    position = 0
    while position < len(content):
        size = rng.choice([1, 7, 64, 300, 4096])
        out += builder.records(IMPORT_ID, feed(content[position : position + size]))
        position += size
    out += builder.records(IMPORT_ID, finish())
    return out


def _csv_file(
    rng: random.Random,
    *,
    header: bool,
    quotes: bool,
    width: int,
    values: list[str] = VALUES,
    delimiter: str = ",",
) -> bytes:
    lines: list[str] = []
    if header:
        lines.append(delimiter.join(f"c{index}" for index in range(1, width + 1)))
    for _ in range(rng.randint(0, 60)):
        shape = rng.random()
        if shape < 0.08:
            lines.append("")
            continue
        columns = width if shape < 0.85 else rng.choice([1, width - 1, width + 1, width + 3])
        row = [rng.choice(values) for _ in range(max(columns, 1))]
        if quotes and rng.random() < 0.1:
            row[rng.randrange(len(row))] = '"quoted, ""with"" comma\nand a line"'
        lines.append(delimiter.join(row))
    ending = rng.choice(["\n", "\r\n"])
    text = ending.join(lines) + (ending if rng.random() < 0.7 else "")
    return text.encode()


def _settings(rng: random.Random, header: bool, width: int, delimiter: str = ",") -> ImportSettings:
    columns = [f"c{index}" if header else str(index) for index in range(1, width + 1)]
    mapped = rng.sample(columns, rng.randint(1, width))
    mapping = {column: f"f{rng.randint(0, 99)}_{index}" for index, column in enumerate(mapped)}
    identity: dict[str, Any] = rng.choice(
        [
            {"item_id_field": next(iter(mapping.values()))},
            {"dedupe_keys": tuple(list(mapping.values())[:2])},
            {},
        ]
    )
    return ImportSettings(
        format=ImportFormat.CSV, field_mapping=mapping, has_header=header, delimiter=delimiter, **identity
    )


@pytest.mark.parametrize("seed", range(300))
def test_plain_blocks_stage_exactly_what_the_record_path_stages(seed: int) -> None:
    rng = random.Random(seed)
    header = rng.random() < 0.7
    width = rng.randint(1, 4)
    values = VERBATIM_VALUES if seed % 2 else VALUES
    # Every fifth file is tab-separated (then values with a tab in them split there, on both paths).
    delimiter = "\t" if seed % 5 == 4 else ","
    content = _csv_file(
        rng, header=header, quotes=seed % 3 == 0, width=width, values=values, delimiter=delimiter
    )
    settings = _settings(rng, header, width, delimiter)
    try:
        expected = _stage(content, settings, plain=False, rng=random.Random(seed))
    except HeaderRejected:
        with pytest.raises(HeaderRejected):
            _stage(content, settings, plain=True, rng=random.Random(seed + 1))
        return
    assert _stage(content, settings, plain=True, rng=random.Random(seed + 1)) == expected


@pytest.mark.parametrize("seed", range(100))
def test_plain_txt_blocks_stage_exactly_what_the_record_path_stages(seed: int) -> None:
    rng = random.Random(seed)
    header = rng.random() < 0.3
    lines = (["phone"] if header else []) + [rng.choice([*VALUES, "  138002  ", "\t"]) for _ in range(50)]
    content = rng.choice(["\n", "\r\n"]).join(lines).encode()
    settings = ImportSettings(
        format=ImportFormat.TXT,
        field_mapping={"phone" if header else "1": "mobile"},
        has_header=header,
        item_id_field="mobile",
    )
    expected = _stage(content, settings, plain=False, rng=random.Random(seed))
    assert _stage(content, settings, plain=True, rng=random.Random(seed + 1)) == expected


def test_a_quote_or_a_bare_carriage_return_sends_the_block_to_the_parser() -> None:
    reader = RecordReader(format=ImportFormat.CSV, max_record_chars=1024)
    assert reader.feed_block(b"a,b\r\nc,d\r\n") == PlainLines(1, ["a,b", "c,d"], json_verbatim=True)
    assert not isinstance(reader.feed_block(b'e,"f"\n'), PlainLines)
    assert not isinstance(reader.feed_block(b"g\rh,i\n"), PlainLines)
    assert not isinstance(reader.feed_block(b"\xff,j\n"), PlainLines)
    assert reader.feed_block(b"k,l\n") == PlainLines(6, ["k,l"], json_verbatim=True)
    assert reader.feed_block(b"m\\,n\tn\n") == PlainLines(7, ["m\\,n\tn"], json_verbatim=False)


def test_a_tab_is_verbatim_only_where_it_separates_values() -> None:
    tsv = RecordReader(format=ImportFormat.CSV, delimiter="\t", max_record_chars=1024)
    assert tsv.feed_block(b"a\tb\n") == PlainLines(1, ["a\tb"], json_verbatim=True)
    assert tsv.feed_block(b"c\x01\td\n") == PlainLines(2, ["c\x01\td"], json_verbatim=False)
    txt = RecordReader(format=ImportFormat.TXT, max_record_chars=1024)
    assert txt.feed_block(b"a\tb\n") == PlainLines(1, ["a\tb"], json_verbatim=False)


def test_plain_lines_keep_the_canonical_json_of_the_mapped_fields() -> None:
    settings = ImportSettings(
        format=ImportFormat.CSV,
        field_mapping={"b": "zeta", "a": "alpha", "c": "%d"},
        item_id_field="alpha",
    )
    builder = RowBuilder(settings, LIMITS)
    records = builder.records(IMPORT_ID, PlainLines(1, ["a,b,c", 'Zoë,"x,tab\tz', "", "y,1,2,3"]))
    assert records == [
        (IMPORT_ID, 2, "Zoë", '{"%d":"tab\\tz","alpha":"Zoë","zeta":"\\"x"}', "ACCEPTED", None, None, None),
        (
            IMPORT_ID,
            4,
            None,
            None,
            "REJECTED",
            "COLUMN_COUNT",
            "the line has 4 columns; the header has 3",
            "y,1,2,3",
        ),
    ]
