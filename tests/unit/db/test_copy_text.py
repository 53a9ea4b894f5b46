"""COPY's text format decoded back into the values' bytes, whatever the chunk boundaries."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from wepush.server.infra.db._copy_text import CopyTextDecoder

# What PostgreSQL's COPY TO writes for each byte that it escapes inside a value.
_ESCAPED = {
    b"\\": b"\\\\",
    b"\b": b"\\b",
    b"\f": b"\\f",
    b"\n": b"\\n",
    b"\r": b"\\r",
    b"\t": b"\\t",
    b"\v": b"\\v",
}


def _copy_text(rows: Sequence[tuple[bytes, ...]]) -> bytes:
    def value(raw: bytes) -> bytes:
        return b"".join(_ESCAPED.get(bytes([b]), bytes([b])) for b in raw)

    return b"".join(b"\t".join(value(v) for v in row) + b"\n" for row in rows)


def _decoded(stream: bytes, cuts: list[int]) -> bytes:
    decoder = CopyTextDecoder()
    out = []
    start = 0
    for cut in [*cuts, len(stream)]:
        out.append(decoder.decode(stream[start:cut]))
        start = cut
    decoder.finish()
    return b"".join(out)


def test_plain_rows_pass_through_unchanged() -> None:
    stream = b'k1\t{"a":"b"}\nk2\t{"a":"c"}\n'
    assert CopyTextDecoder().decode(stream) == stream


def test_every_escape_is_undone_wherever_the_chunks_are_cut() -> None:
    rows = [(b"back\\slash", b'{"p":"C:\\\\temp"}'), (b"tab\tkey", b"\b\f\v\r\n"), (b"\\", b"\\\\\\")]
    stream = _copy_text(rows)
    expected = b"".join(b"\t".join(row) + b"\n" for row in rows)
    for cut in range(len(stream) + 1):
        assert _decoded(stream, [cut]) == expected, cut


def test_random_values_round_trip_in_random_chunks() -> None:
    rng = random.Random(7)
    alphabet = [b"\\", b"\t", b"\n", b"\r", b"\b", b"\f", b"\v", b"a", b"n", b"t", "ü".encode(), b'"']
    for _ in range(200):
        rows = [
            tuple(b"".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(2))
            for _ in range(rng.randrange(1, 6))
        ]
        stream = _copy_text(rows)
        cuts = sorted(rng.sample(range(len(stream) + 1), k=min(len(stream) + 1, rng.randrange(1, 6))))
        assert _decoded(stream, cuts) == b"".join(b"\t".join(row) + b"\n" for row in rows)


def test_a_stream_ending_inside_an_escape_is_an_error() -> None:
    decoder = CopyTextDecoder()
    assert decoder.decode(b"abc\\") == b"abc"
    with pytest.raises(ValueError, match="ended inside an escape"):
        decoder.finish()


def test_an_escape_copy_never_writes_is_an_error() -> None:
    with pytest.raises(ValueError, match="unexpected COPY escape"):
        CopyTextDecoder().decode(b"\\x41")
