"""Compressed uploads: every coding the upload accepts gives back the file's bytes, in bounded pieces."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import AsyncIterator

import pytest

from wepush.server.application._import_coding import (
    PIECE_BYTES,
    ContentCoding,
    ContentCodingUnsupported,
    content_coding,
    decoded,
)
from wepush.server.application._import_errors import ContentRejected

FILE = b"mobile,name\n" + b"".join(b"1380000%04d,Customer %d\n" % (i, i) for i in range(5000))


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def _inflate(data: bytes, coding: ContentCoding, size: int = 1000) -> list[bytes]:
    return [piece async for piece in decoded(_chunks(data, size), coding)]


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        (None, ContentCoding.IDENTITY),
        ("identity", ContentCoding.IDENTITY),
        ("gzip", ContentCoding.GZIP),
        ("GZip", ContentCoding.GZIP),
        ("x-gzip", ContentCoding.GZIP),
        ("deflate", ContentCoding.DEFLATE),
        ("identity, gzip", ContentCoding.GZIP),
        (" gzip ,", ContentCoding.GZIP),
    ],
)
def test_the_header_names_one_coding(header: str | None, coding: ContentCoding) -> None:
    assert content_coding(header) is coding


@pytest.mark.parametrize("header", ["br", "compress", "zstd", "gzip, gzip", "gzip, deflate", "gzip;q=1"])
def test_an_unknown_or_repeated_coding_is_refused_with_415_naming_the_header(header: str) -> None:
    with pytest.raises(ContentCodingUnsupported) as refused:
        content_coding(header)
    assert refused.value.status == 415
    assert refused.value.code == "VALIDATION_FAILED"
    assert [issue.field for issue in refused.value.issues] == ["Content-Encoding"]
    assert "gzip or deflate" in str(refused.value)


@pytest.mark.parametrize("size", [1, 7, 1000, 1 << 20])
async def test_gzip_and_deflate_give_back_the_file_whatever_the_chunk_size(size: int) -> None:
    assert b"".join(await _inflate(gzip.compress(FILE), ContentCoding.GZIP, size)) == FILE
    assert b"".join(await _inflate(zlib.compress(FILE), ContentCoding.DEFLATE, size)) == FILE


async def test_identity_passes_the_chunks_through_untouched() -> None:
    assert await _inflate(FILE, ContentCoding.IDENTITY, 100) == [
        FILE[i : i + 100] for i in range(0, len(FILE), 100)
    ]


async def test_concatenated_gzip_members_and_zero_padding_read_as_one_file_as_gunzip_reads_them() -> None:
    body = gzip.compress(FILE[:1000]) + gzip.compress(FILE[1000:]) + b"\x00" * 512
    for size in (1, 10, len(body)):
        assert b"".join(await _inflate(body, ContentCoding.GZIP, size)) == FILE


async def test_a_decompression_bomb_comes_out_in_bounded_pieces() -> None:
    # 64 MiB of zeros compress to about 64 KiB; no piece may be larger than PIECE_BYTES, so the staging
    # step's byte limit (checked after every piece) stops it one piece past the limit at most.
    bomb = gzip.compress(bytes(64 << 20), compresslevel=9)
    assert len(bomb) < 128 << 10
    total = 0
    async for piece in decoded(_chunks(bomb, len(bomb)), ContentCoding.GZIP):
        assert len(piece) <= PIECE_BYTES
        total += len(piece)
    assert total == 64 << 20


@pytest.mark.parametrize(
    ("body", "coding", "reason"),
    [
        (FILE, ContentCoding.GZIP, "not valid gzip content (incorrect header check)"),
        (FILE, ContentCoding.DEFLATE, "not valid deflate content"),
        (gzip.compress(FILE)[:-100], ContentCoding.GZIP, "ends before its last block"),
        (zlib.compress(FILE)[:-3], ContentCoding.DEFLATE, "ends before its last block"),
        (gzip.compress(FILE)[:-4] + b"\x00\x00\x00\x01", ContentCoding.GZIP, "incorrect length check"),
        (gzip.compress(FILE) + b"trailing junk", ContentCoding.GZIP, "not valid gzip content"),
        (zlib.compress(FILE) + b"x", ContentCoding.DEFLATE, "has data after its end"),
        (b"", ContentCoding.GZIP, "the body is empty"),
        (os.urandom(4096), ContentCoding.DEFLATE, "not valid deflate content"),
    ],
    ids=[
        "plain-as-gzip",
        "plain-as-deflate",
        "cut-gzip",
        "cut-deflate",
        "bad-trailer",
        "junk",
        "extra",
        "empty",
        "random",
    ],
)
async def test_corrupt_or_truncated_content_is_rejected_with_a_reason(
    body: bytes, coding: ContentCoding, reason: str
) -> None:
    with pytest.raises(ContentRejected, match=re.escape(reason)):
        await _inflate(body, coding)
