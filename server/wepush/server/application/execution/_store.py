"""The ArtifactStore port: where artifact bytes live. The database row is the lifecycle's source of truth;
the store only holds bytes under keys it generated itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from wepush.server.domain import ArtifactOwnerType

__all__ = ["ArtifactObjectMissing", "ArtifactStore", "ArtifactUpload", "StoredObject"]


class ArtifactObjectMissing(LookupError):
    """No object exists under the key (never created, already deleted, or lost)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"artifact object {key} does not exist")
        self.key = key


@dataclass(frozen=True, slots=True)
class StoredObject:
    """What the store knows about one object. ``sha256`` is set when the store computed it (on completion)."""

    key: str
    size_bytes: int
    sha256: str | None = None


class ArtifactUpload(Protocol):
    """An object being written. Nothing is visible under ``key`` until the store completes the upload."""

    @property
    def key(self) -> str: ...

    @property
    def size_bytes(self) -> int:
        """Bytes accepted so far."""
        ...

    async def write(self, data: bytes) -> None: ...


class ArtifactStore(Protocol):
    """Stores artifact bytes.

    ``new_key`` derives the key from ids only, never from user input (names, file names), so keys cannot
    traverse or collide. ``complete`` makes the object durable and visible atomically and reports its size
    and SHA-256; ``abort`` discards an upload. ``open_range`` yields bytes ``start`` (inclusive) to ``end``
    (exclusive) and raises :class:`ArtifactObjectMissing` before yielding anything when the object is
    absent. ``delete`` is idempotent: it returns ``False`` when nothing was there.
    """

    def new_key(
        self,
        *,
        workspace_id: str,
        owner_type: ArtifactOwnerType,
        owner_id: str,
        artifact_id: str,
        extension: str,
    ) -> str: ...

    async def begin_upload(self, key: str) -> ArtifactUpload: ...

    async def complete(self, upload: ArtifactUpload) -> StoredObject: ...

    async def abort(self, upload: ArtifactUpload) -> None: ...

    async def stat(self, key: str) -> StoredObject | None: ...

    async def open_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]: ...

    async def delete(self, key: str) -> bool: ...

    async def reclaim_abandoned(self, older_than: timedelta, *, in_use: Collection[str] = ()) -> int:
        """Discard uploads nobody completed or aborted for ``older_than`` (their writer died); returns how
        many were discarded. Uploads to a key in ``in_use`` are never discarded: the database says
        their run still writes them."""
        ...
