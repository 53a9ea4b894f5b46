"""The content codings an import upload may arrive in (HTTP ``Content-Encoding``): gzip, deflate or none.

A list exported from another system is often sent compressed (``curl -H 'Content-Encoding: gzip'
--data-binary @list.csv.gz``): it arrives several times faster, and the import limits still apply to the
file itself. Decompression runs in steps of at most :data:`PIECE_BYTES` of output, so a small body that
inflates to gigabytes (a decompression bomb) never gets further than one piece past the byte limit the
staging step checks after every piece.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import ClassVar, Final

from wepush.server.application._import_errors import ContentRejected
from wepush.server.application.errors import FieldIssue, ValidationFailed

__all__ = ["PIECE_BYTES", "ContentCoding", "ContentCodingUnsupported", "content_coding", "decoded"]

#: The most file bytes one decompression step produces (and staging holds at once).
PIECE_BYTES: Final = 256 * 1024
_HEADER: Final = "Content-Encoding"


class ContentCoding(enum.Enum):
    IDENTITY = "identity"
    GZIP = "gzip"
    DEFLATE = "deflate"
    """The zlib format, as RFC 9110 defines the ``deflate`` coding."""


#: RFC 9110 §8.4.1.3: a recipient should treat ``x-gzip`` as ``gzip``.
_NAMES: Final = {
    "identity": ContentCoding.IDENTITY,
    "gzip": ContentCoding.GZIP,
    "x-gzip": ContentCoding.GZIP,
    "deflate": ContentCoding.DEFLATE,
}
_WBITS: Final = {ContentCoding.GZIP: 16 + zlib.MAX_WBITS, ContentCoding.DEFLATE: zlib.MAX_WBITS}


class ContentCodingUnsupported(ValidationFailed):
    """415: the body is in a coding the Service cannot undo (RFC 9110 §15.5.16)."""

    status: ClassVar[int] = 415

    def __init__(self, header: str) -> None:
        shown = header if len(header) <= 64 else header[:63] + "…"
        message = f"Content-Encoding {shown!r} is not supported; send the file as is, or as gzip or deflate"
        super().__init__(message, [FieldIssue(_HEADER, "UNSUPPORTED_CONTENT_ENCODING", message)])


def content_coding(header: str | None) -> ContentCoding:
    """The coding a ``Content-Encoding`` header names. ``identity`` entries are no-ops; more than one
    real coding (a file compressed twice) or an unknown one is refused before anything is read."""
    if header is None:
        return ContentCoding.IDENTITY
    names = [name.strip().lower() for name in header.split(",") if name.strip()]
    if any(name not in _NAMES for name in names):
        raise ContentCodingUnsupported(header)
    applied = [_NAMES[name] for name in names if _NAMES[name] is not ContentCoding.IDENTITY]
    if len(applied) > 1:
        raise ContentCodingUnsupported(header)
    return applied[0] if applied else ContentCoding.IDENTITY


async def decoded(chunks: AsyncIterator[bytes], coding: ContentCoding) -> AsyncIterator[bytes]:
    """The file's bytes from the body's, in pieces of at most :data:`PIECE_BYTES` when decompressing.

    Raises :class:`ContentRejected` when the compressed data is corrupt or ends before its last block
    (a truncated download, say)."""
    if coding is ContentCoding.IDENTITY:
        async for chunk in chunks:
            yield chunk
        return
    inflater = _Inflater(coding)
    try:
        async for chunk in chunks:
            for piece in inflater.feed(chunk):
                yield piece
        inflater.finish()
    except zlib.error as error:
        raise ContentRejected(f"the body is not valid {coding.value} content ({_reason(error)})") from None


class _Inflater:
    """One zlib stream per member: several gzip members one after another, as ``cat a.gz b.gz`` makes,
    are one file, as ``gunzip`` reads them; a deflate body is exactly one stream."""

    def __init__(self, coding: ContentCoding) -> None:
        self._coding = coding
        self._stream = zlib.decompressobj(_WBITS[coding])
        self._received = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        stream = self._stream
        while data:
            if stream.eof:
                # gzip files may be padded with zero bytes after a member (gunzip ignores them).
                data = data.lstrip(b"\x00") if self._coding is ContentCoding.GZIP else data
                if not data:
                    break
                if self._coding is not ContentCoding.GZIP:
                    raise ContentRejected(f"the {self._coding.value} content has data after its end")
                stream = self._stream = zlib.decompressobj(_WBITS[self._coding])
            self._received = True
            piece = stream.decompress(data, PIECE_BYTES)
            if piece:
                yield piece
            # Input held back because the piece was full, or the start of the next member.
            data = stream.unused_data if stream.eof else stream.unconsumed_tail
        # Output zlib still holds for input it has already taken.
        while not stream.eof and (piece := stream.decompress(b"", PIECE_BYTES)):
            yield piece

    def finish(self) -> None:
        if not self._received:
            raise ContentRejected(f"the body is empty, which is not {self._coding.value} content")
        if not self._stream.eof:
            raise ContentRejected(
                f"the {self._coding.value} content ends before its last block (is it cut short?)"
            )


def _reason(error: zlib.error) -> str:
    # zlib's text reads "Error -3 while decompressing data: incorrect header check".
    text = str(error)
    return text.split(": ", 1)[1] if ": " in text else text
