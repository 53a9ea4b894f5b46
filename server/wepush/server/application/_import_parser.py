"""Incremental CSV/TXT reading: bytes arrive in chunks of any size, records leave as soon as they are whole.

Nothing here holds more than one chunk, one incomplete line and (for a quoted field spanning lines) the
lines of one unfinished record. Decoding (``ImportText``) keeps an invalid byte as a marker so it never
aborts the upload: it marks only the record it belongs to (``INVALID_ENCODING``).

The stdlib ``csv`` module does the CSV work, fed with the complete lines of each chunk. Its reader cannot
be suspended in the middle of a record, so it runs in ``strict`` mode over one chunk's lines at a time:
when a quoted field is still open at the end of those lines, ``csv`` reports "unexpected end of data"
and the record's lines are carried over to the next chunk and parsed again with it. ``reader.line_num``
tells which lines each record used, which gives line numbers and the raw text of rejected rows without
any per-line Python work.
"""

from __future__ import annotations

import codecs
import csv
import re
from typing import Final, NamedTuple

from wepush.server.application._import_errors import ContentRejected
from wepush.server.application._import_text import ImportText
from wepush.server.domain import ImportFormat

__all__ = [
    "LONE_CR_HINT",
    "ParsedRecord",
    "PlainLines",
    "ReadBlock",
    "RecordProblem",
    "RecordReader",
    "RecordTooLong",
    "has_lone_carriage_returns",
]

#: Characters no database text column accepts (NUL) and undecodable bytes kept as lone surrogates.
_UNSTORABLE: Final = re.compile("[\x00\udc80-\udcff]")
#: The bytes of UTF-8 text that JSON keeps as they are inside a string: all but the quote, the backslash
#: and the control characters; a newline only separates a block's lines, and in a plain CSV block a
#: carriage return only ends one (a TXT value keeps an inner one, which JSON escapes).
_JSON_AS_IS_TXT: Final = bytes(b for b in range(0x20, 0x100) if b not in b'"\\') + b"\n"
_JSON_AS_IS_CSV: Final = _JSON_AS_IS_TXT + b"\r"
_CSV_EOF_IN_QUOTES: Final = "unexpected end of data"
#: ``csv`` refuses a field longer than its limit (128 Ki characters by default) and then reads on at the
#: next line as if outside quotes, so the lines inside a long quoted value became rows of their own (a
#: phone number in a note, accepted as a recipient). The reader bounds a record itself
#: (``max_record_chars``, 16 Mi characters at most), and a field over the import's field length is
#: rejected by the row builder naming its column, so csv's own limit is lifted above any record. The
#: limit is process-wide; nothing in the Service relies on the default.
_CSV_FIELD_SIZE_LIMIT: Final = 2**31 - 1
if csv.field_size_limit() < _CSV_FIELD_SIZE_LIMIT:
    csv.field_size_limit(_CSV_FIELD_SIZE_LIMIT)


#: What a file whose lines end in a carriage return alone (classic Mac OS, "CSV (Macintosh)") reads as:
#: one line, since RFC 4180 ends lines in CRLF and every other program in LF.
LONE_CR_HINT: Final = (
    "its lines seem to end in a carriage return alone (old Mac line ends): save it with CRLF or LF line ends"
)
_LONE_CR: Final = re.compile(r"\r(?![\r\n]|$)")


def has_lone_carriage_returns(raw: str) -> bool:
    """Whether a line holds a carriage return that neither ends it nor precedes a line feed."""
    return _LONE_CR.search(raw) is not None


def _splits_on_lone_carriage_returns(text: str, *, quoted: bool) -> bool:
    """Whether ``text`` (a file without a line feed) has a carriage return that would end a line in an old
    Mac file. In CSV one inside a quoted field is data (an even number of quotes before it means it lies
    outside), so a one-line file with a multi-line quoted value stays readable."""
    quotes = 0
    seen = 0
    for match in _LONE_CR.finditer(text):
        if not quoted:
            return True
        quotes += text.count('"', seen, match.start())
        seen = match.start()
        if quotes % 2 == 0:
            return True
    return False


class RecordProblem:
    """Row codes a record can carry before any mapping is applied."""

    INVALID_ENCODING: Final = "INVALID_ENCODING"
    INVALID_CHARACTER: Final = "INVALID_CHARACTER"
    MALFORMED_CSV: Final = "MALFORMED_CSV"


class ParsedRecord(NamedTuple):
    """One input record. ``values`` is None when the record could not be split into columns."""

    line_number: int
    values: list[str] | None
    raw: str
    problem: str | None


class PlainLines(NamedTuple):
    """Complete lines, terminators removed, that need no CSV parsing: no quote, no NUL, no undecodable
    byte and no carriage return but in a CRLF terminator. Each splits on the delimiter alone exactly as
    ``csv`` would split it, which lets the row builder skip building a record per line. Blank lines
    are kept: they count for line numbers."""

    first_line_number: int
    lines: list[str]
    json_verbatim: bool = False
    """No value holds a character JSON escapes (a quote, backslash or control character): each value,
    in quotes, is already its own JSON string."""


#: What one ``feed``/``finish`` call completes: records, or a block of plain lines.
ReadBlock = list[ParsedRecord] | PlainLines


class RecordTooLong(Exception):
    """A single line or unfinished record outgrew ``max_record_chars``; reading further would mean
    buffering without bound, so the whole import stops."""

    def __init__(self, line_number: int, limit: int, *, lone_carriage_returns: bool = False) -> None:
        message = f"line {line_number} is longer than {limit} characters (or opens a quote never closed)"
        if lone_carriage_returns:
            message += f"; {LONE_CR_HINT}"
        super().__init__(message)
        self.line_number = line_number
        self.limit = limit


#: Why a file without a line feed whose carriage returns would split it into lines fails its import.
_ONE_LINE_OF_LONE_CRS: Final = f"the whole file reads as one line; {LONE_CR_HINT}"


def _scan(text: str, json_as_is: bytes) -> tuple[bool, bool]:
    """Whether a block may hold an unstorable character, and whether it needs no JSON escape: two C
    passes over its UTF-8 bytes (a regular expression over a mebibyte of text takes ten times as long).
    A lone surrogate (an undecodable byte) does not encode: the block goes to the careful path."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return True, False
    return b"\x00" in data, not data.translate(None, json_as_is)


def unstorable_problem(text: str) -> str | None:
    match = _UNSTORABLE.search(text)
    if match is None:
        return None
    return RecordProblem.INVALID_CHARACTER if match.group() == "\x00" else RecordProblem.INVALID_ENCODING


class RecordReader:
    """``feed(chunk)`` and finally ``finish()``; each returns the records completed by that call.

    Blank lines are skipped (they still count for line numbers). TXT records are one stripped value per
    line; CSV records follow RFC 4180 with the given delimiter (quoted fields may span lines).
    ``feed_block``/``finish_block`` do the same, except that a block whose lines need no parsing comes
    back as :class:`PlainLines` instead of records.
    """

    def __init__(
        self,
        *,
        format: ImportFormat,
        delimiter: str = ",",
        encoding: str = "utf-8",
        max_record_chars: int,
    ) -> None:
        self._csv = format is ImportFormat.CSV
        self._json_as_is = _JSON_AS_IS_TXT
        if self._csv:
            # Lines are split on the delimiter, so no value holds it: a tab-separated file stays verbatim.
            self._json_as_is = _JSON_AS_IS_CSV + delimiter.encode(errors="surrogateescape")
        self._delimiter = delimiter
        self._decoder = ImportText(encoding)
        self._max = max_record_chars
        # A byte-order mark is an encoding signature, never data: spreadsheet programs write one before
        # UTF-8 (and GB18030) CSV files, and kept it would rename the first header column. The utf-8-sig
        # codec removes its own.
        self._at_start = codecs.lookup(encoding).name != "utf-8-sig"
        self._partial = ""
        self._line_feed_seen = False
        self._carry: list[str] = []
        self._carry_chars = 0
        self._lines_done = 0
        self._finished = False

    @property
    def lines_read(self) -> int:
        """Physical lines handed over as records so far (the line number of the last one seen)."""
        return self._lines_done

    def feed(self, chunk: bytes) -> list[ParsedRecord]:
        block = self._feed(chunk, plain=False)
        assert isinstance(block, list)
        return block

    def finish(self) -> list[ParsedRecord]:
        """Flush the last line (with or without a trailing newline) and any unfinished record."""
        block = self._finish(plain=False)
        assert isinstance(block, list)
        return block

    def feed_block(self, chunk: bytes) -> ReadBlock:
        return self._feed(chunk, plain=True)

    def finish_block(self) -> ReadBlock:
        return self._finish(plain=True)

    def _feed(self, chunk: bytes, *, plain: bool) -> ReadBlock:
        if self._finished:
            raise RuntimeError("the reader is finished")
        text = self._partial + self._without_bom(self._decoder.decode(chunk))
        cut = text.rfind("\n") + 1
        self._check_line_lengths(text, cut)
        self._partial = text[cut:]
        if len(self._partial) > self._max:
            raise self._too_long(text, cut)
        if cut == 0:
            return []
        self._line_feed_seen = True
        return self._records(text[:cut], final=False, plain=plain)

    def _finish(self, *, plain: bool) -> ReadBlock:
        if self._finished:
            return []
        self._finished = True
        text = self._partial + self._without_bom(self._decoder.decode(b"", final=True))
        self._partial = ""
        if self._one_line_of_lone_carriage_returns(text):
            # Read on, it would be one record: a CSV row or a TXT value holding every line.
            raise ContentRejected(_ONE_LINE_OF_LONE_CRS)
        if text and not text.endswith("\n"):
            text += "\n"
        self._check_line_lengths(text, len(text))
        return self._records(text, final=True, plain=plain)

    def _one_line_of_lone_carriage_returns(self, text: str) -> bool:
        """Whether the file, ending in ``text``, has no line feed but carriage returns that end lines."""
        if self._line_feed_seen or "\n" in text:
            return False
        return _splits_on_lone_carriage_returns(text, quoted=self._csv)

    def _check_line_lengths(self, text: str, end: int) -> None:
        """Raise :class:`RecordTooLong` for a complete line in ``text[:end]`` (each ends in a line feed)
        longer than the limit, as for the unfinished one, so that the outcome never depends on how
        the upload was split into chunks. Only a chunk longer than the limit can hold such a line; in one
        the search jumps from the last line feed within reach to the next, a C scan per limit's length."""
        limit = self._max
        start = 0
        while end - 1 - start > limit:
            line_feed = text.rfind("\n", start, start + limit + 1)
            if line_feed < 0:
                raise self._too_long(text, start)
            start = line_feed + 1

    def _too_long(self, text: str, start: int) -> RecordTooLong:
        """The error for the overlong line that starts at ``text[start]``."""
        line_number = self._lines_done + len(self._carry) + text.count("\n", 0, start) + 1
        # Within the limit's reach only, so that the hint too is the same however the file arrived.
        seen = text[start : start + self._max + 1]
        return RecordTooLong(line_number, self._max, lone_carriage_returns=has_lone_carriage_returns(seen))

    def _without_bom(self, text: str) -> str:
        if not self._at_start or not text:
            return text
        self._at_start = False
        return text[1:] if text.startswith("\ufeff") else text

    def _records(self, complete: str, *, final: bool, plain: bool) -> ReadBlock:
        suspicious, json_verbatim = _scan(complete, self._json_as_is)
        if plain and not suspicious and not self._carry:
            block = self._plain(complete, json_verbatim)
            if block is not None:
                return block
        lines = [line + "\n" for line in complete[:-1].split("\n")] if complete else []
        if not self._csv:
            return self._txt(lines, suspicious)
        if self._carry:
            suspicious = suspicious or any(_UNSTORABLE.search(line) for line in self._carry)
            lines = self._carry + lines
            self._carry = []
        return self._csv_records(lines, final=final, suspicious=suspicious)

    def _plain(self, complete: str, json_verbatim: bool) -> PlainLines | None:
        """The block as plain lines, or None when some line needs the CSV parser (a quote, or a carriage
        return that does not end a line). A TXT line never does: it is only stripped."""
        if not complete:
            return None
        if self._csv:
            if '"' in complete:
                return None
            if "\r" in complete:
                if complete.count("\r") != complete.count("\r\n"):
                    return None
                complete = complete.replace("\r\n", "\n")
        lines = complete[:-1].split("\n")
        first = self._lines_done + 1
        self._lines_done += len(lines)
        return PlainLines(first, lines, json_verbatim)

    def _txt(self, lines: list[str], suspicious: bool) -> list[ParsedRecord]:
        base = self._lines_done
        self._lines_done += len(lines)
        out: list[ParsedRecord] = []
        for index, line in enumerate(lines):
            value = line.strip()
            if value:
                problem = unstorable_problem(value) if suspicious else None
                out.append(ParsedRecord(base + index + 1, [value], line, problem))
        return out

    def _csv_records(self, lines: list[str], *, final: bool, suspicious: bool) -> list[ParsedRecord]:
        base = self._lines_done
        reader = csv.reader(lines, delimiter=self._delimiter, strict=True)
        out: list[ParsedRecord] = []
        start = 0
        while True:
            try:
                for values in reader:
                    end = reader.line_num
                    if values:
                        raw = lines[start] if end - start == 1 else self._multi_line(lines, start, end)
                        problem = unstorable_problem(raw) if suspicious else None
                        out.append(ParsedRecord(base + start + 1, values, raw, problem))
                    start = end
                break
            except csv.Error as error:
                end = reader.line_num
                message = str(error)
                if not final and end >= len(lines) and message.startswith(_CSV_EOF_IN_QUOTES):
                    # A quoted field continues in data not received yet: parse these lines again later.
                    self._carry = lines[start:]
                    self._carry_chars = sum(len(line) for line in self._carry)
                    if self._carry_chars > self._max:
                        raise RecordTooLong(base + start + 1, self._max) from None
                    break
                if final and message.startswith(_CSV_EOF_IN_QUOTES) and end - start > 1:
                    # Rejecting this "row" would silently drop every line after the quote with it.
                    raise ContentRejected(
                        f"line {base + start + 1} opens a quoted field that is never closed, so the "
                        f"{end - start - 1} lines after it would all be part of one value: close the quote "
                        "(a quote inside a field is written twice) and start a new import"
                    ) from None
                raw = lines[start] if end - start == 1 else self._multi_line(lines, start, end)
                out.append(ParsedRecord(base + start + 1, None, raw, RecordProblem.MALFORMED_CSV))
                start = end
        self._lines_done = base + len(lines) - len(self._carry)
        return out

    def _multi_line(self, lines: list[str], start: int, end: int) -> str:
        """The raw text of a record on ``lines[start:end]``; one longer than the limit stops the import
        as it does when the record arrives in pieces and is carried over unfinished."""
        raw = "".join(lines[start:end])
        if len(raw) > self._max:
            raise RecordTooLong(self._lines_done + start + 1, self._max)
        return raw
