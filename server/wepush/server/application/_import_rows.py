"""From parsed records to staging rows: the header, the column mapping and the per-row checks.

Every data record becomes exactly one :class:`StagedRow`, ACCEPTED with its recipient fields and item key
or REJECTED with a stable code and the raw line. Duplicates are decided later by the database (first line
wins), so this step keeps no per-recipient state and its memory stays flat for any file size.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Final

from wepush.server.application._deps import ImportLimits
from wepush.server.application._import_errors import HeaderRejected, ImportLimitError
from wepush.server.application._import_parser import (
    LONE_CR_HINT,
    ParsedRecord,
    PlainLines,
    ReadBlock,
    RecordProblem,
    has_lone_carriage_returns,
)
from wepush.server.application._import_settings import ImportSettings
from wepush.server.domain import (
    ImportFormat,
    StagedRecord,
    StagedRow,
    StagedRowStatus,
    canonical_json,
    staged_record,
)

__all__ = ["MAX_ITEM_KEY_CHARS", "MAX_RAW_CHARS", "RowBuilder", "RowCode", "storable"]

MAX_ITEM_KEY_CHARS: Final = 256
_DIGEST_PREFIX: Final = "sha256:"
MAX_RAW_CHARS: Final = 4096
_MAX_NAME_CHARS: Final = 64
_SHOWN_COLUMNS: Final = 8
_USUAL_DELIMITERS: Final = (",", ";", "\t", "|")
_ACCEPTED: Final = StagedRowStatus.ACCEPTED


class RowCode:
    """Stable codes of rejected rows (the parser adds INVALID_ENCODING, INVALID_CHARACTER,
    MALFORMED_CSV; the database adds DUPLICATE_ITEM_KEY)."""

    COLUMN_COUNT: Final = "COLUMN_COUNT"
    FIELD_TOO_LONG: Final = "FIELD_TOO_LONG"
    MISSING_FIELD: Final = "MISSING_FIELD"
    ITEM_ID_TOO_LONG: Final = "ITEM_ID_TOO_LONG"


_PROBLEM_REASONS: Final = {
    RecordProblem.INVALID_ENCODING: "the line is not valid {encoding}",
    RecordProblem.INVALID_CHARACTER: "the line contains a NUL character",
    RecordProblem.MALFORMED_CSV: "the line is not well-formed CSV (check the quotes)",
}

#: What a line the chosen encoding cannot read usually is instead.
_OTHER_ENCODING_HINTS: Final = {
    "utf-8": "; spreadsheet programs on Chinese systems usually save gb18030",
    "utf-8-sig": "; spreadsheet programs on Chinese systems usually save gb18030",
    "utf-16": "; a file that is not Excel's Unicode Text is usually utf-8 or gb18030",
}


def storable(text: str) -> str:
    """``text`` made safe for a database text column: undecodable bytes and NUL become U+FFFD."""
    if text.isascii() and "\x00" not in text:
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace").replace("\x00", "\ufffd")


def _short(name: str) -> str:
    return name if len(name) <= _MAX_NAME_CHARS else name[: _MAX_NAME_CHARS - 1] + "…"


def _columns(count: int) -> str:
    return f"{count} column{'s' if count != 1 else ''}"


def _header_found(columns: Sequence[str], delimiter: str) -> str:
    """What the header does hold, so the user can fix the mapping or the delimiter without opening the
    file: a few column names, and the delimiter the single column seems to contain."""
    shown = ", ".join(repr(_short(name)) for name in columns[:_SHOWN_COLUMNS])
    more = f" and {len(columns) - _SHOWN_COLUMNS} more" if len(columns) > _SHOWN_COLUMNS else ""
    found = f"it has {_columns(len(columns))}: {shown}{more}"
    if len(columns) == 1:
        other = next((d for d in _USUAL_DELIMITERS if d != delimiter and d in columns[0]), None)
        if other is not None:
            found += f" (the file looks {other!r}-separated; this import splits on {delimiter!r})"
    return found


class RowBuilder:
    """Feed it every record in order; the first one is the header when the settings say so."""

    def __init__(self, settings: ImportSettings, limits: ImportLimits) -> None:
        self._settings = settings
        self._limits = limits
        self._max_field = limits.max_field_length
        self._columns: list[str] | None = None
        self._picks: list[tuple[int, str]] = []
        self._width = 0
        self._key_fields = settings.key_fields
        self._key_index: int | None = None
        # TXT values are stripped where the line is read; CSV values here, once split or parsed.
        self._trim = settings.trim_whitespace and settings.format is not ImportFormat.TXT

    @property
    def source_columns(self) -> list[str]:
        """The file's columns (header values, or "1".."n"); empty until the first record was seen."""
        return list(self._columns or [])

    @property
    def fields(self) -> list[str]:
        """Recipient field names in file column order (what the snapshot will list)."""
        return [name for _, name in self._picks]

    @property
    def awaiting_header(self) -> bool:
        return self._columns is None and self._settings.has_header

    def header(self, record: ParsedRecord) -> None:
        if record.values is None or record.problem is not None:
            reason = f"the header on line {record.line_number} cannot be read ({record.problem})"
            if "\x00" in record.raw and self._settings.encoding != "utf-16":
                # NUL bytes between the letters are how UTF-16 text looks when read as anything else.
                reason += "; a NUL in the header usually means the file is UTF-16: choose encoding utf-16"
            elif has_lone_carriage_returns(record.raw):
                reason += f"; {LONE_CR_HINT}"
            elif record.problem == RecordProblem.INVALID_ENCODING:
                reason += _OTHER_ENCODING_HINTS.get(self._settings.encoding, "")
            raise HeaderRejected(reason)
        self._set_columns([value.strip() for value in record.values], record.line_number)

    def _set_columns(self, columns: list[str], line_number: int) -> None:
        if len(columns) > self._limits.max_columns:
            raise ImportLimitError(
                f"line {line_number} has {len(columns)} columns; at most {self._limits.max_columns} are allowed"
            )
        positions: dict[str, int] = {}
        repeated: set[str] = set()
        for index, name in enumerate(columns):
            if name in positions:
                repeated.add(name)
            positions.setdefault(name, index)
        picks: list[tuple[int, str]] = []
        for column, field_name in self._settings.field_mapping.items():
            if column in repeated:
                raise HeaderRejected(
                    f"the mapped column {_short(column)!r} appears more than once in the header"
                )
            if column not in positions:
                if self._settings.has_header:
                    raise HeaderRejected(
                        f"the mapped column {_short(column)!r} is not in the header; "
                        + _header_found(columns, self._settings.delimiter)
                    )
                raise HeaderRejected(
                    f"the mapped column {_short(column)!r} is not in a file of {len(columns)} column"
                    f"{'' if len(columns) == 1 else 's'}"
                )
            picks.append((positions[column], field_name))
        picks.sort()
        self._columns = columns
        self._picks = picks
        self._width = len(columns)
        if len(self._key_fields) == 1:
            self._key_index = next(index for index, name in picks if name == self._key_fields[0])

    def records(self, import_id: str, block: ReadBlock) -> list[StagedRecord]:
        """The staged records of what the reader completed, reading the header from it first if due.
        Every data record (every non-blank line of a plain block) gives exactly one staged record."""
        if isinstance(block, PlainLines):
            block = self._after_header(block)
            return self.plain_records(import_id, block) if block.lines else []
        start = 0
        if block and self.awaiting_header:
            self.header(block[0])
            start = 1
        build = self.build
        return [staged_record(import_id, build(block[index])) for index in range(start, len(block))]

    def _after_header(self, block: PlainLines) -> PlainLines:
        """The block without its leading blank lines and header line, once the header is read from it."""
        if not self.awaiting_header:
            return block
        txt = self._settings.format is ImportFormat.TXT
        for index, line in enumerate(block.lines):
            if txt and line.strip():
                values = [line.strip()]
            elif not txt and line:
                values = line.split(self._settings.delimiter)
            else:
                continue
            self.header(ParsedRecord(block.first_line_number + index, values, line, None))
            return block._replace(
                first_line_number=block.first_line_number + index + 1, lines=block.lines[index + 1 :]
            )
        return block._replace(first_line_number=block.first_line_number + len(block.lines), lines=[])

    def plain_records(self, import_id: str, block: PlainLines) -> list[StagedRecord]:
        """The staged records of a block of plain lines: the same rows :meth:`build` makes of the same
        lines, with no record or row object per line (the bulk of every real file takes this path)."""
        out: list[StagedRecord] = []
        append = out.append
        line_number = block.first_line_number - 1
        lines = block.lines
        txt = self._settings.format is ImportFormat.TXT
        start = 0
        if self._columns is None:
            # Without a header the first row decides the width; let the general path see it.
            while start < len(lines) and self._columns is None:
                self._build_one(import_id, line_number + start + 1, lines[start], txt, append)
                start += 1
        if start == len(lines):
            return out
        if self._key_index is None:
            # No single identity column (dedupe keys, or none): the general path builds the key.
            for index in range(start, len(lines)):
                self._build_one(import_id, line_number + index + 1, lines[index], txt, append)
            return out
        width, key_index, max_field = self._width, self._key_index, self._max_field
        delimiter, accepted, trim = self._settings.delimiter, _ACCEPTED.value, self._trim
        encode = self._encode_fields(verbatim=block.json_verbatim)
        for index in range(start, len(lines)):
            line = lines[index]
            values = [line.strip()] if txt else line.split(delimiter)
            if trim:
                values = [value.strip() for value in values]
            if not values[0] and (txt or not line):
                continue
            key = values[key_index] if len(values) == width else ""
            if (
                not key
                or len(key) > MAX_ITEM_KEY_CHARS
                or (len(line) > max_field and max(map(len, values)) > max_field)
            ):
                self._build_one(import_id, line_number + index + 1, line, txt, append)
                continue
            append((import_id, line_number + index + 1, key, encode(values), accepted, None, None, None))
        return out

    def _build_one(
        self, import_id: str, line_number: int, line: str, txt: bool, append: Callable[[StagedRecord], None]
    ) -> None:
        """One plain line through the general path (headerless first rows and every rejection)."""
        if txt:
            value = line.strip()
            if value:
                append(staged_record(import_id, self.build(ParsedRecord(line_number, [value], line, None))))
            return
        if not line:
            return
        values = line.split(self._settings.delimiter)
        append(staged_record(import_id, self.build(ParsedRecord(line_number, values, line, None))))

    def _encode_fields(self, *, verbatim: bool = False) -> Callable[[list[str]], str]:
        """values → the canonical JSON text of the mapped fields (keys sorted, as ``canonical_json``).

        ``verbatim``: no value needs a JSON escape, so each goes between its quotes as it is — one
        string formatting per row instead of an escaping call per value."""
        ordered = sorted(self._picks, key=lambda pick: pick[1])
        slot = '"%s"' if verbatim else "%s"
        template = (
            "{"
            + ",".join(encode_basestring(name).replace("%", "%%") + ":" + slot for _, name in ordered)
            + "}"
        )
        positions = [index for index, _ in ordered]
        if len(positions) == 1:
            (only,) = positions
            if verbatim:
                return lambda values: template % (values[only],)
            return lambda values: template % encode_basestring(values[only])
        pick = operator.itemgetter(*positions)
        if verbatim:
            return lambda values: template % pick(values)
        return lambda values: template % tuple(map(encode_basestring, pick(values)))

    def build(self, record: ParsedRecord) -> StagedRow:
        line, values, raw, problem = record
        if problem is not None or values is None:
            code = problem or RecordProblem.MALFORMED_CSV
            encoding = self._settings.encoding
            reason = _PROBLEM_REASONS.get(code, code).format(encoding=encoding)
            if code == RecordProblem.INVALID_ENCODING:
                reason += _OTHER_ENCODING_HINTS.get(encoding, "")
            return self._reject(line, code, reason, raw)
        if self._trim:
            values = [value.strip() for value in values]
        if self._columns is None:
            self._set_columns([str(n) for n in range(1, len(values) + 1)], line)
        if len(values) != self._width:
            expected = "the header" if self._settings.has_header else "the first row"
            return self._reject(
                line,
                RowCode.COLUMN_COUNT,
                f"the line has {_columns(len(values))}; {expected} has {self._width}",
                raw,
            )
        if max(map(len, values)) > self._max_field:
            return self._reject(line, RowCode.FIELD_TOO_LONG, self._too_long(values), raw)
        fields = {name: values[index] for index, name in self._picks}
        # The common case, one key field, is read straight from its column.
        key = values[self._key_index] if self._key_index is not None else self._item_key(fields, line)
        if not key:
            return self._reject(line, RowCode.MISSING_FIELD, self._missing(fields), raw)
        if len(key) > MAX_ITEM_KEY_CHARS:
            return self._reject(
                line,
                RowCode.ITEM_ID_TOO_LONG,
                f"the item id is longer than {MAX_ITEM_KEY_CHARS} characters",
                raw,
            )
        return StagedRow(line_number=line, status=_ACCEPTED, item_key=key, fields=fields)

    def _item_key(self, fields: dict[str, str], line: int) -> str | None:
        keys = self._key_fields
        if not keys:
            # Without an identity every row is its own recipient, known by where it came from.
            return f"line-{line}" if any(fields.values()) else None
        parts = [fields[name] for name in keys]
        if not all(parts):
            return None
        composite = canonical_json(parts)
        if len(composite) <= MAX_ITEM_KEY_CHARS:
            return composite
        # Dedupe keys the user chose, each within the field limit, can add up past the item id's length:
        # such a row is known by the digest of its keys instead of being rejected for a limit it never set.
        return _DIGEST_PREFIX + hashlib.sha256(composite.encode("utf-8", "surrogatepass")).hexdigest()

    def _missing(self, fields: dict[str, str]) -> str:
        empty = [name for name in self._key_fields if not fields[name]]
        if empty:
            return f"required field {_short(empty[0])!r} is empty"
        return "no mapped column has a value"

    def _too_long(self, values: Sequence[str]) -> str:
        columns = self._columns or []
        index = next(i for i, value in enumerate(values) if len(value) > self._max_field)
        name = columns[index] if index < len(columns) else str(index + 1)
        return f"column {_short(name)!r} is longer than {self._max_field} characters"

    @staticmethod
    def _reject(line: int, code: str, reason: str, raw: str) -> StagedRow:
        text = raw.rstrip("\r\n")
        if len(text) > MAX_RAW_CHARS:
            text = text[:MAX_RAW_CHARS]
        return StagedRow(
            line_number=line,
            status=StagedRowStatus.REJECTED,
            reason_code=code,
            reason=storable(reason),
            raw=storable(text),
        )
