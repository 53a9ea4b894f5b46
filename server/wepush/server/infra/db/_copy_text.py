"""Read PostgreSQL's ``COPY … TO STDOUT`` text format back into the bytes of the values.

``COPY`` hands a query's rows over as one byte stream — no per-row message, record or Python object —
which is several times faster than a cursor for a million rows. In that format columns are separated by
a tab and rows end with a newline; inside a value a backslash, tab, newline, carriage return, backspace,
form feed and vertical tab are written as backslash sequences (``COPY TO`` never writes octal or hex
sequences). :class:`CopyTextDecoder` undoes exactly that, chunk by chunk: a chunk may end in the middle
of a sequence, so a lone trailing backslash waits for the next chunk.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CopyTextDecoder"]

_UNESCAPED: Final = {
    b"\\": b"\\",
    b"b": b"\b",
    b"f": b"\f",
    b"n": b"\n",
    b"r": b"\r",
    b"t": b"\t",
    b"v": b"\v",
}
_SEQUENCE: Final = re.compile(rb"\\(.)", re.DOTALL)


def _unescape(match: re.Match[bytes]) -> bytes:
    escaped = match.group(1)
    try:
        return _UNESCAPED[escaped]
    except KeyError:
        raise ValueError(f"unexpected COPY escape sequence \\{escaped.decode(errors='replace')}") from None


class CopyTextDecoder:
    """Feed the raw chunks in order; :meth:`finish` checks the stream did not end inside a sequence."""

    __slots__ = ("_carry",)

    def __init__(self) -> None:
        self._carry = b""

    def decode(self, chunk: bytes) -> bytes:
        data = self._carry + chunk if self._carry else chunk
        self._carry = b""
        if b"\\" not in data:
            return data
        # An odd run of backslashes at the end leaves its last one unpaired: it starts a sequence whose
        # second byte is in the next chunk.
        trailing = len(data) - len(data.rstrip(b"\\"))
        if trailing % 2:
            data, self._carry = data[:-1], b"\\"
        return _SEQUENCE.sub(_unescape, data)

    def finish(self) -> None:
        if self._carry:
            raise ValueError("the COPY output ended inside an escape sequence")
