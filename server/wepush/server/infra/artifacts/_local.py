"""``LocalArtifactStore``: artifacts as files under one root directory (standalone mode).

An upload goes to a private temporary file in ``<root>/.uploads/``; completing it fsyncs the file, renames
it atomically onto its final path and fsyncs the directory, so a reader sees either nothing or the whole
object. Files are 0600 and directories 0700. Keys are generated here from ids and checked again before any
path is built, so no key can leave the root.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO, Final

from wepush.server.application.execution import ArtifactObjectMissing, ArtifactUpload, StoredObject

from ._keys import GeneratedKeys, checked_key
from ._upload import HashingUpload, own

__all__ = ["LocalArtifactStore"]

_UPLOADS: Final = ".uploads"
_BUFFER: Final = 256 * 1024
_READ_CHUNK: Final = 64 * 1024


class _LocalUpload(HashingUpload):
    """Buffers writes and appends them to the temporary file off the event loop."""

    def __init__(self, key: str, temp: Path, handle: BinaryIO) -> None:
        super().__init__(key)
        self.temp = temp
        self.handle = handle

    async def write(self, data: bytes) -> None:
        self.accept(data)
        if len(self.buffer) >= _BUFFER:
            await self.drain()

    async def drain(self) -> None:
        if self.buffer:
            await asyncio.to_thread(self.handle.write, self.take_buffer())


class LocalArtifactStore(GeneratedKeys):
    """The :class:`~wepush.server.application.execution.ArtifactStore` on the local file system."""

    def __init__(self, root: Path | str, *, clock: Callable[[], float] = time.time) -> None:
        self._root = Path(root).resolve()
        self._clock = clock
        # Uploads this store is still writing: never reclaimed, however long since their last write.
        self._open: set[Path] = set()

    def __repr__(self) -> str:
        return f"LocalArtifactStore({str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
        path = (self._root / checked_key(key)).resolve()
        if self._root not in path.parents:
            raise ValueError("artifact key escapes the store root")
        return path

    async def begin_upload(self, key: str) -> ArtifactUpload:
        self._path(key)
        return await asyncio.to_thread(self._open_temp, key)

    def _open_temp(self, key: str) -> _LocalUpload:
        uploads = self._root / _UPLOADS
        uploads.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = uploads / f"{uuid.uuid4().hex}.part"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        self._open.add(temp)
        return _LocalUpload(key, temp, os.fdopen(fd, "wb"))

    async def complete(self, upload: ArtifactUpload) -> StoredObject:
        local = own(upload, _LocalUpload)
        await local.drain()
        local.finished = True
        self._open.discard(local.temp)
        target = self._path(local.key)
        await asyncio.to_thread(_publish, local.handle, local.temp, target)
        return StoredObject(local.key, local.size, local.digest.hexdigest())

    async def abort(self, upload: ArtifactUpload) -> None:
        local = own(upload, _LocalUpload)
        local.finished = True
        self._open.discard(local.temp)
        await asyncio.to_thread(_discard, local.handle, local.temp)

    async def stat(self, key: str) -> StoredObject | None:
        path = self._path(key)
        try:
            size = (await asyncio.to_thread(path.stat)).st_size
        except FileNotFoundError:
            return None
        return StoredObject(key, size)

    async def open_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        if start < 0 or end < start:
            raise ValueError("a byte range needs 0 <= start <= end")
        path = self._path(key)
        try:
            handle = await asyncio.to_thread(path.open, "rb")
        except FileNotFoundError:
            raise ArtifactObjectMissing(key) from None
        return _read(handle, start, end)

    async def delete(self, key: str) -> bool:
        path = self._path(key)
        return await asyncio.to_thread(_remove, path)

    async def reclaim_abandoned(self, older_than: timedelta, *, in_use: Collection[str] = ()) -> int:
        # One Service writes a local directory, so the uploads it has open are all that are in use.
        del in_use
        return await asyncio.to_thread(
            _reclaim, self._root / _UPLOADS, self._clock() - older_than.total_seconds(), frozenset(self._open)
        )


async def _read(handle: BinaryIO, start: int, end: int) -> AsyncIterator[bytes]:
    try:
        await asyncio.to_thread(handle.seek, start)
        remaining = end - start
        while remaining > 0:
            chunk = await asyncio.to_thread(handle.read, min(_READ_CHUNK, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)


def _publish(handle: BinaryIO, temp: Path, target: Path) -> None:
    try:
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.replace(temp, target)
    _fsync_directory(target.parent)


def _discard(handle: BinaryIO, temp: Path) -> None:
    with contextlib.suppress(OSError):
        handle.close()
    temp.unlink(missing_ok=True)


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    _fsync_directory(path.parent)
    with contextlib.suppress(OSError):
        # Only succeeds once the run's last artifact is gone; an empty directory is not worth keeping.
        path.parent.rmdir()
    return True


def _reclaim(uploads: Path, cutoff: float, still_open: frozenset[Path]) -> int:
    """Discard temporary files not written to since ``cutoff`` (a file's mtime moves with every write)."""
    removed = 0
    try:
        entries = list(uploads.iterdir())
    except FileNotFoundError:
        return 0
    for entry in entries:
        with contextlib.suppress(FileNotFoundError):
            if entry.suffix == ".part" and entry not in still_open and entry.stat().st_mtime < cutoff:
                entry.unlink()
                removed += 1
    return removed


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
