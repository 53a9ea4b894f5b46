"""The ``charset`` an upload's ``Content-Type`` may declare, checked against the import's encoding.

The import's ``encoding`` setting decides how the file is read. A client that also declares a charset
(``Content-Type: text/csv; charset=gbk``) says what the bytes are; when the two disagree, reading on
would reject every non-ASCII row or, worse, garble it (UTF-8 read as GB18030), so the upload is refused
(415) before anything is read, and the import still waits for its content. A charset that agrees, or
none, changes nothing.
"""

from __future__ import annotations

import codecs
from email.message import Message
from typing import ClassVar, Final

from wepush.server.application.errors import FieldIssue, ValidationFailed

__all__ = ["CharsetMismatch", "check_declared_charset"]

_HEADER: Final = "Content-Type"
_ASCII: Final = "ascii"
#: Codec names (as ``codecs.lookup`` spells them) each import encoding reads correctly.
_READS: Final[dict[str, frozenset[str]]] = {
    "utf-8": frozenset({"utf-8", "utf-8-sig", _ASCII}),
    "utf-8-sig": frozenset({"utf-8", "utf-8-sig", _ASCII}),
    "gb18030": frozenset({"gb18030", "gbk", "gb2312", _ASCII}),
    "utf-16": frozenset({"utf-16", "utf-16-le", "utf-16-be"}),
}
_MAX_SHOWN: Final = 40


class CharsetMismatch(ValidationFailed):
    """415: the upload declares a charset its import does not read."""

    status: ClassVar[int] = 415

    def __init__(self, message: str) -> None:
        super().__init__(message, [FieldIssue(_HEADER, "CHARSET_MISMATCH", message)])


def _declared(content_type: str) -> str | None:
    header = Message()
    header["content-type"] = content_type
    charset = header.get_content_charset()
    return None if charset is None else str(charset)


def _encoding_for(codec: str) -> str | None:
    """The import encoding that reads ``codec``, if any."""
    for encoding, reads in _READS.items():
        if codec in reads and codec != _ASCII:
            return "utf-8" if encoding == "utf-8-sig" else encoding
    return None


def check_declared_charset(content_type: str | None, encoding: str) -> None:
    """:class:`CharsetMismatch` when ``content_type`` declares a charset ``encoding`` does not read."""
    charset = None if content_type is None else _declared(content_type)
    if not charset:
        return
    shown = charset if len(charset) <= _MAX_SHOWN else charset[: _MAX_SHOWN - 1] + "…"
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        raise CharsetMismatch(
            f"the upload declares charset={shown}, which is no text encoding the Service knows; "
            "send the file without a charset, or with the one its import reads"
        ) from None
    if codec in _READS.get(encoding, frozenset()):
        return
    fits = _encoding_for(codec)
    advice = (
        f"start a new import with encoding {fits}"
        if fits
        else "imports read utf-8, gb18030 (GBK, GB2312) and utf-16 files: save it in one of them"
    )
    raise CharsetMismatch(
        f"the upload declares charset={shown}, but this import reads {encoding}: {advice}, or send the "
        "file without a charset if the declaration is wrong"
    )
