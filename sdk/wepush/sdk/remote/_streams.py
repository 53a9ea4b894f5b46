"""Streamed uploads and downloads over httpx, for bodies too large to hold in memory.

The generated client builds every request body and reads every response body whole, which is wrong for
a million-row audience file or a multi-gigabyte result artifact. These helpers move the bytes in chunks
and apply the same typed errors and retry policy as the JSON operations.

- An upload is a PUT. After 429 or 503 (the Service did not process it) it is sent again as the policy
  allows when the SDK can produce the body again: from a file path, bytes, or a seekable stream rewound
  to where it stood. A one-shot stream (a pipe, a socket) is not retried, nor is any upload after a
  network error, which may have left the import receiving.
- A download is a GET: after a network failure it resumes with a ``Range`` request from the first byte not
  yet written, and refuses to continue when the server does not answer that range exactly.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from ._errors import InvalidResponse, TransportError, problem_error_from_response
from ._retry import parse_retry_after
from ._session import Session

__all__ = ["BinarySource", "Destination", "Download", "download", "upload"]

CHUNK_SIZE = 64 * 1024

BinarySource = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]
Destination = str | os.PathLike[str] | IO[bytes]

_RETRYABLE_HTTPX = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes \*/(\d+)")


@dataclass(frozen=True, slots=True)
class Download:
    """What a download wrote: byte count, the full content size when known, and the media type."""

    bytes_written: int
    total_size: int | None
    content_type: str | None


def _read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    # A generator body makes httpx send Transfer-Encoding: chunked, holding one chunk at a time.
    while block := stream.read(CHUNK_SIZE):
        yield block


Opener = Callable[[contextlib.ExitStack], Any]


def _rewind_position(stream: IO[bytes]) -> int | None:
    """Where a seekable stream stands now (to send it again from there); None when it cannot rewind."""
    try:
        return stream.tell() if stream.seekable() else None
    except (OSError, ValueError):
        return None


def _opener(source: BinarySource) -> tuple[Opener, bool]:
    """A function giving the body for one attempt, and whether it can give it more than once."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        return (lambda stack: data), True
    if isinstance(source, str | os.PathLike):
        path = source
        return (lambda stack: _read_chunks(stack.enter_context(open(path, "rb")))), True
    start = _rewind_position(source)
    if start is None:
        return (lambda stack: _read_chunks(source)), False

    def rewound(stack: contextlib.ExitStack) -> Iterator[bytes]:
        source.seek(start)
        return _read_chunks(source)

    return rewound, True


def upload(
    session: Session,
    path: str,
    source: BinarySource,
    *,
    content_type: str,
    content_encoding: str | None = None,
    timeout: float | None = None,
) -> Any:
    """PUT ``source`` to ``path`` in chunks; returns the decoded JSON answer.

    429 and 503 are retried as the policy allows when the body can be sent again (a path, bytes or a
    seekable stream); a one-shot stream's 429/503, and every network error, are raised at once.
    ``timeout`` (seconds per read or write) replaces the client's ``request_timeout`` for this upload.
    """
    limits = session.timeouts.for_call(timeout).httpx()
    opener, replayable = _opener(source)
    sent = {"Content-Type": content_type, "Accept": "application/json"}
    if content_encoding is not None:
        sent["Content-Encoding"] = content_encoding
    attempt = 0
    while True:
        response = _put_once(session, path, opener, sent, attempt, limits)
        if 200 <= response.status_code < 300:
            break
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=session.now())
        delay = (
            session.retry.after_unprocessed(attempt, response.status_code, retry_after, session.rng)
            if replayable
            else None
        )
        if delay is None:
            raise problem_error_from_response(response.status_code, response.content, retry_after=retry_after)
        session.sleep(delay)
        attempt += 1
    try:
        return response.json()
    except ValueError as exc:
        raise InvalidResponse(f"PUT {path} answered {response.status_code} without a JSON body") from exc


def _put_once(
    session: Session, path: str, opener: Opener, sent: dict[str, str], attempt: int, limits: httpx.Timeout
) -> httpx.Response:
    with contextlib.ExitStack() as stack:
        headers = session.auth_headers(**sent)
        try:
            return session.http.request("PUT", path, content=opener(stack), headers=headers, timeout=limits)
        except httpx.TransportError as exc:
            raise TransportError(type(exc).__name__, method="PUT", path=path, attempts=attempt + 1) from exc


def _range_header(first: int | None, last: int | None) -> str | None:
    if first is None and last is None:
        return None
    return f"bytes={first or 0}-{'' if last is None else last}"


def _total_size(response: httpx.Response) -> int | None:
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if match:
        return None if match.group(3) == "*" else int(match.group(3))
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() and response.status_code == 200 else None


def _unsatisfied_size(response: httpx.Response) -> int | None:
    match = _UNSATISFIED_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    return int(match.group(1)) if match else None


def _check_range(response: httpx.Response, expected_first: int | None, path: str) -> None:
    if expected_first is None:
        return
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if response.status_code != 206 or match is None or int(match.group(1)) != expected_first:
        raise InvalidResponse(
            f"GET {path} did not honour the requested range starting at byte {expected_first}"
        )


def _stream_once(
    session: Session,
    path: str,
    sink: IO[bytes],
    first: int | None,
    last: int | None,
    accept: str,
    limits: httpx.Timeout,
) -> tuple[httpx.Response, int]:
    """One GET; returns the response and the bytes written (raises mid-body on a dropped connection)."""
    headers = session.auth_headers(Accept=accept)
    range_header = _range_header(first, last)
    if range_header:
        headers["Range"] = range_header
    written = 0
    with session.http.stream("GET", path, headers=headers, timeout=limits) as response:
        if not 200 <= response.status_code < 300:
            response.read()
            return response, 0
        _check_range(response, first, path)
        try:
            # Unbuffered: every byte received is written, so a resume starts exactly after it.
            for block in response.iter_bytes():
                sink.write(block)
                written += len(block)
        except _RETRYABLE_HTTPX as exc:
            raise _PartialBody(written) from exc
    return response, written


class _PartialBody(Exception):
    def __init__(self, written: int) -> None:
        super().__init__(written)
        self.written = written


def _download_into(
    session: Session,
    path: str,
    sink: IO[bytes],
    first: int | None,
    last: int | None,
    accept: str,
    limits: httpx.Timeout,
) -> Download:
    written = 0
    attempt = 0
    while True:
        ranged = first is not None or last is not None or written > 0
        start = (first or 0) + written if ranged else None
        try:
            response, chunk = _stream_once(session, path, sink, start, last, accept, limits)
        except (_PartialBody, *_RETRYABLE_HTTPX) as exc:
            written += exc.written if isinstance(exc, _PartialBody) else 0
            delay = session.retry.after_network_error(attempt, "GET", {}, session.rng)
            if delay is None:
                cause = exc.__cause__ if isinstance(exc, _PartialBody) else exc
                raise TransportError(
                    type(cause).__name__, method="GET", path=path, attempts=attempt + 1
                ) from cause
            session.sleep(delay)
            attempt += 1
            continue
        status = response.status_code
        if 200 <= status < 300:
            return Download(
                bytes_written=written + chunk,
                total_size=_total_size(response),
                content_type=response.headers.get("Content-Type"),
            )
        if status == 416 and written > 0 and _unsatisfied_size(response) == start:
            # The connection dropped after the last byte but before the response was complete.
            return Download(bytes_written=written, total_size=start, content_type=None)
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=session.now())
        delay = session.retry.after_status(attempt, "GET", {}, status, retry_after, session.rng)
        if delay is None:
            raise problem_error_from_response(status, response.content, retry_after=retry_after)
        session.sleep(delay)
        attempt += 1


def download(
    session: Session,
    path: str,
    dest: Destination,
    *,
    first: int | None = None,
    last: int | None = None,
    accept: str = "*/*",
    timeout: float | None = None,
) -> Download:
    """GET ``path`` into ``dest`` (a file path, or a writable binary stream).

    ``first``/``last`` select an inclusive byte range. A file path receives the content only once the
    download is complete: the bytes go to a temporary file beside it (mode 0600, as artifacts hold
    recipients' personal data), which then replaces it. A failed download (409 ARTIFACT_NOT_READY, a
    dropped connection after the last retry) therefore leaves no file that looks complete, and never
    touches a file that was already there. ``timeout`` (seconds to wait for the answer and for each
    further chunk) replaces the client's ``request_timeout`` for this download.
    """
    limits = session.timeouts.for_call(timeout).httpx()
    if not isinstance(dest, (str, os.PathLike)):
        return _download_into(session, path, dest, first, last, accept, limits)
    given = Path(dest)
    if given.exists() and not given.is_file():
        # A device or a pipe (/dev/stdout): nothing to keep, nothing to replace.
        with open(given, "wb") as sink:
            return _download_into(session, path, sink, first, last, accept, limits)
    # Where open() would write: through a symbolic link, not over it.
    target = Path(os.path.realpath(given))
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(descriptor, "wb") as sink:
            result = _download_into(session, path, sink, first, last, accept, limits)
        with contextlib.suppress(FileNotFoundError):
            # A file replaced keeps the permissions its owner gave it.
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return result
