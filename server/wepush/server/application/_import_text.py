"""An import's bytes as text in the chosen encoding, with what it cannot decode kept as markers.

Undecodable bytes become lone surrogates (U+DC80–U+DCFF) instead of aborting the upload, so they reject
only the row they are on (``INVALID_ENCODING``). Python's own ``surrogateescape`` does that only for
bytes from 0x80 up, and a UTF-16 or GB18030 sequence can fail on an ASCII byte too; the handler here
marks every byte.

UTF-16 is what Excel saves as "Unicode Text": tab-separated, with a byte-order mark. The mark decides
the byte order; without one the file is read little-endian, as Windows writes it, unless its first two
characters plainly are big-endian (``00 xx 00 xx``: read little-endian, those would be two characters
U+xx00, which no real header or first value starts with).
A file that starts with a UTF-16 mark is never text in the other encodings (in UTF-8 and GB18030 0xFF
cannot start a character), and neither is one whose first characters alternate with NUL bytes (no text
file holds NULs), so both are refused with the setting to choose rather than rejected row by row.

UTF-8 read as GB18030 is the one mistake no row would show: nearly every UTF-8 byte sequence is also
valid GB18030, so 张三 would be stored as 寮犱笁 and sent to every recipient that way. Real GBK or
GB18030 text, on the other hand, almost never is valid UTF-8 (its second bytes fall outside UTF-8's
continuation range within a character or two). So a gb18030 import holds back the file's first 64 KiB:
when their non-ASCII bytes all form UTF-8 characters (a UTF-8 byte-order mark included, as Excel's
"CSV UTF-8" saves) the import fails naming utf-8; the first byte that is not UTF-8 releases the text.
A start of ASCII alone is released and the rest watched, so UTF-8 after it fails the import there.

The mirror image, a UTF-8 (or GB18030) file in a utf-16 import, would be read as one line of CJK-looking
characters (``13800000001`` as ㌱〸〰…): no line feed, so one garbled recipient or a line too long. In
UTF-16 every line break, digit, comma, tab and Latin letter has a NUL byte, so an unmarked file whose
first 64 KiB hold none at all, while holding a line break byte or being at least a few bytes long, is not
UTF-16 and fails the import naming the encoding it reads as. A byte-order mark says UTF-16 and is trusted
(a file of Chinese text alone has no NUL). Nothing needs holding back for this: without a NUL byte no
line feed is decoded, so no record leaves the reader before the start is judged.
"""

from __future__ import annotations

import codecs
from typing import Final

from wepush.server.application._import_errors import ContentRejected

__all__ = ["ImportText"]

_UNDECODABLE: Final = "wepush-import-undecodable"
_UTF16: Final = "utf-16"
_UTF16_MARKS: Final = {codecs.BOM_UTF16_LE: "utf-16-le", codecs.BOM_UTF16_BE: "utf-16-be"}
_MARK_BYTES: Final = 2
_GZIP_MAGIC: Final = b"\x1f\x8b\x08"
_SAVE_AS_CSV: Final = "open it in the spreadsheet program, save the sheet as CSV UTF-8, and import that file"
_START_AGAIN: Final = "start a new import with a CSV or text file"
#: How files that are not text start (their first bytes), what they are and what to do: read as text,
#: their bytes were rejected row by row or as a header in some other encoding, which sent users the wrong
#: way ("a NUL in the header usually means the file is UTF-16").
_NOT_TEXT: Final = {
    b"PK\x03\x04": ("a ZIP archive, as an Excel workbook (.xlsx) is", _SAVE_AS_CSV),
    b"\xd0\xcf\x11\xe0": (
        "an old-style Office document, as an Excel 97-2003 workbook (.xls) is",
        _SAVE_AS_CSV,
    ),
    b"%PDF": ("a PDF document", _START_AGAIN),
    b"\x89PNG": ("a PNG image", _START_AGAIN),
    b"\xff\xd8\xff": ("a JPEG image", _START_AGAIN),
    b"GIF8": ("a GIF image", _START_AGAIN),
    b"7z\xbc\xaf": ("a 7-Zip archive", _START_AGAIN),
    b"Rar!": ("a RAR archive", _START_AGAIN),
}
#: Enough of the file's start to see both a byte-order mark and two unmarked UTF-16 code units.
_SNIFF_BYTES: Final = 4
_GB18030: Final = "gb18030"
#: How much of a gb18030 import is held back to tell UTF-8 from GB18030.
_UTF8_PROBE_BYTES: Final = 64 * 1024
#: Non-ASCII bytes that must all form UTF-8 before a file is taken for UTF-8: two CJK characters.
_UTF8_EVIDENCE_BYTES: Final = 6
_ASCII: Final = bytes(range(0x80))
#: Bytes without a NUL that make a file in a utf-16 import not UTF-16 even without a line break in them:
#: four characters, none of them ASCII, is more than a real unmarked file starts with.
_UTF16_EVIDENCE_BYTES: Final = 8
_LINE_BREAK_BYTES: Final = (b"\n", b"\r")


def _mark_undecodable(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    bad = error.object[error.start : error.end]
    return "".join(chr(0xDC80 | (byte & 0x7F)) for byte in bad), error.end


codecs.register_error(_UNDECODABLE, _mark_undecodable)


class ImportText:
    """``decode(chunk)`` for each chunk of the file, then ``decode(b"", final=True)``; a byte-order mark
    stays in the text for the reader to drop."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._decoder: codecs.IncrementalDecoder | None = None
        self._head = b""
        self._probe: _Utf8Probe | None = None
        self._nul_check: _Utf16NulCheck | None = None

    def decode(self, data: bytes, *, final: bool = False) -> str:
        if self._decoder is None:
            self._head += data
            if len(self._head) < _SNIFF_BYTES and not final:
                return ""
            data, self._head = self._head, b""
            self._decoder = self._start(data)
        if self._nul_check is not None and self._nul_check.watch(data, final=final):
            self._nul_check = None
        if self._probe is not None:
            released = self._probe.hold(data, final=final)
            if released is None:
                return ""
            if self._probe.settled:
                self._probe = None
            data = released
        return self._decoder.decode(data, final)

    def _start(self, start: bytes) -> codecs.IncrementalDecoder:
        """The decoder for the file that begins with ``start``, and the checks its first bytes need."""
        codec = self._codec(start[:_SNIFF_BYTES])
        if codec == _GB18030:
            self._probe = _Utf8Probe()
        elif self._encoding == _UTF16 and not _UTF16_MARKS.get(start[:_MARK_BYTES]):
            self._nul_check = _Utf16NulCheck()
        return codecs.getincrementaldecoder(codec)(_UNDECODABLE)

    def _codec(self, start: bytes) -> str:
        kind = next((found for magic, found in _NOT_TEXT.items() if start.startswith(magic)), None)
        if kind is not None:
            raise ContentRejected(f"the file is not CSV or text but {kind[0]}: {kind[1]}")
        if start.startswith(_GZIP_MAGIC):
            # A compressed file sent as it is: its bytes read as text would be rejected row by row.
            raise ContentRejected(
                "the file is gzip-compressed: send it with the header Content-Encoding: gzip, "
                "or uncompressed, to a new import"
            )
        mark = _UTF16_MARKS.get(start[:_MARK_BYTES])
        unmarked = None if mark else _unmarked_utf16(start)
        if self._encoding == _UTF16:
            return mark or unmarked or "utf-16-le"
        if mark:
            raise ContentRejected(
                f"the file is UTF-16 (it starts with a UTF-16 byte-order mark), not {self._encoding}: "
                "start a new import with encoding utf-16"
            )
        if unmarked:
            raise ContentRejected(
                "the file looks like UTF-16 without a byte-order mark (NUL bytes between its first "
                f"characters), not {self._encoding}: start a new import with encoding utf-16"
            )
        return self._encoding


def _unmarked_utf16(start: bytes) -> str | None:
    """The byte order of an unmarked UTF-16 file whose first two characters lie below U+0100."""
    if len(start) < _SNIFF_BYTES:
        return None
    high_first = start[0] == 0 and start[2] == 0 and start[1] != 0 and start[3] != 0
    low_first = start[1] == 0 and start[3] == 0 and start[0] != 0 and start[2] != 0
    if high_first:
        return "utf-16-be"
    return "utf-16-le" if low_first else None


class _Utf8Probe:
    """Holds a gb18030 file's start back until it is plainly not UTF-8, or refuses it as UTF-8.

    A start of ASCII alone settles nothing: it is released, and the rest of the file is watched (not
    held) until its first non-ASCII bytes decide, failing the import there if they are UTF-8.
    """

    def __init__(self) -> None:
        self._held: list[bytes] | None = []
        self._size = 0
        self._non_ascii = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self.settled = False

    def hold(self, data: bytes, *, final: bool) -> bytes | None:
        """``None`` while the start is held back, else what to decode now as GB18030."""
        if self._held is None:
            self._watch(data, final)
            return data
        self._held.append(data)
        self._size += len(data)
        self._watch(data, final, start=False)
        if not self.settled and not final and self._size < _UTF8_PROBE_BYTES:
            return None
        start, self._held = b"".join(self._held), None
        if not self.settled and start.startswith(codecs.BOM_UTF8):
            raise ContentRejected(
                'the file is UTF-8 (it starts with a UTF-8 byte-order mark, as Excel\'s "CSV UTF-8" '
                "saves), not gb18030: start a new import with encoding utf-8"
            )
        self._conclude()
        return start

    def _watch(self, data: bytes, final: bool, *, start: bool = True) -> None:
        try:
            self._utf8.decode(data, final)
        except UnicodeDecodeError:
            self.settled = True  # a byte UTF-8 does not allow: GB18030 it is
            return
        self._non_ascii += len(data.translate(None, _ASCII))
        if start:
            self._conclude()

    def _conclude(self) -> None:
        if self.settled or self._non_ascii < _UTF8_EVIDENCE_BYTES:
            return
        raise ContentRejected(
            "the file reads as UTF-8 (every non-ASCII byte in it so far forms a UTF-8 character), not "
            "gb18030: start a new import with encoding utf-8"
        )


class _Utf16NulCheck:
    """Watches an unmarked utf-16 import's first 64 KiB for the NUL bytes UTF-16 text is full of."""

    def __init__(self) -> None:
        self._seen = 0
        self._line_break = False
        self._utf8: codecs.IncrementalDecoder | None = codecs.getincrementaldecoder("utf-8")("strict")

    def watch(self, data: bytes, *, final: bool) -> bool:
        """True once the file is settled as UTF-16 (or short and judged); raises when it is plainly
        something else. Only the first 64 KiB count, however the file arrives in chunks."""
        window = data[: _UTF8_PROBE_BYTES - self._seen]
        if b"\x00" in window:
            return True
        self._seen += len(window)
        self._line_break = self._line_break or any(byte in window for byte in _LINE_BREAK_BYTES)
        whole = final and len(window) == len(data)
        self._follow_utf8(window, whole)
        if self._seen >= _UTF8_PROBE_BYTES or (
            final and (self._line_break or self._seen >= _UTF16_EVIDENCE_BYTES)
        ):
            raise ContentRejected(
                "the file is not UTF-16 (its start has no NUL byte, which every UTF-16 line break, digit, "
                f"comma and Latin letter has): start a new import with encoding {self._reads_as()}"
            )
        return final

    def _follow_utf8(self, data: bytes, final: bool) -> None:
        if self._utf8 is None:
            return
        try:
            self._utf8.decode(data, final)
        except UnicodeDecodeError:
            self._utf8 = None  # not UTF-8: the other encoding imports read is GB18030

    def _reads_as(self) -> str:
        return "utf-8" if self._utf8 is not None else _GB18030
