"""Reading a run artifact for download: metadata from the database, bytes from the store, one byte range.

The API layer checks permissions, audits the download and writes the headers; this module never reveals
where or how the bytes are stored.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar

from wepush.server.domain import ArtifactOwnerType, ArtifactState, DomainError, NotFound, UnitOfWorkFactory

from ._store import ArtifactObjectMissing, ArtifactStore

__all__ = [
    "ArtifactDownload",
    "ArtifactDownloads",
    "ArtifactNotReady",
    "ByteRange",
    "RangeNotSatisfiable",
    "parse_range_header",
]

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class ArtifactNotReady(DomainError):
    """The artifact exists but is not READY (still uploading, failed, or being deleted)."""

    code: ClassVar[str] = "ARTIFACT_NOT_READY"

    def __init__(self, artifact_id: str, state: ArtifactState) -> None:
        super().__init__(f"artifact {artifact_id} is {state.value}, not READY")
        self.artifact_id = artifact_id
        self.state = state


class RangeNotSatisfiable(DomainError):
    """The requested range lies outside the content (HTTP 416 with ``Content-Range: bytes */<size>``)."""

    code: ClassVar[str] = "VALIDATION_FAILED"

    def __init__(self, size: int) -> None:
        super().__init__(f"the requested range is outside the {size} byte content")
        self.size = size


@dataclass(frozen=True, slots=True)
class ByteRange:
    """One HTTP byte range: ``first``-``last`` inclusive; ``first=None`` asks for the last ``last`` bytes,
    ``last=None`` for everything from ``first``."""

    first: int | None
    last: int | None

    def resolve(self, size: int) -> tuple[int, int]:
        """``(start, end)`` as a half-open interval within ``size``; :class:`RangeNotSatisfiable` if empty."""
        if self.first is None:
            if self.last is None or self.last <= 0 or size == 0:
                raise RangeNotSatisfiable(size)
            return max(0, size - self.last), size
        if self.first >= size or (self.last is not None and self.last < self.first):
            raise RangeNotSatisfiable(size)
        end = size if self.last is None else min(size, self.last + 1)
        return self.first, end


def parse_range_header(value: str | None) -> ByteRange | None:
    """A single ``bytes=`` range from a ``Range`` header; ``None`` for an absent or unsupported header
    (several ranges, other units), which HTTP allows to be answered with the whole content."""
    if not value:
        return None
    match = _RANGE.match(value)
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    first = int(match.group(1)) if match.group(1) else None
    last = int(match.group(2)) if match.group(2) else None
    return ByteRange(first, last)


@dataclass(frozen=True, slots=True)
class ArtifactDownload:
    """What the API needs to answer: ``partial`` means 206 with ``Content-Range: bytes start-(end-1)/size``.

    ``chunks`` yields exactly ``content_length`` bytes; iterate it to the end or call ``aclose()``.
    """

    artifact_id: str
    artifact_type: str
    file_name: str
    content_type: str
    size: int
    sha256: str | None
    start: int
    end: int
    partial: bool
    chunks: AsyncIterator[bytes]

    @property
    def content_length(self) -> int:
        return self.end - self.start

    @property
    def content_range(self) -> str | None:
        return f"bytes {self.start}-{self.end - 1}/{self.size}" if self.partial else None


class ArtifactDownloads:
    def __init__(self, uow: UnitOfWorkFactory, store: ArtifactStore) -> None:
        self._uow = uow
        self._store = store

    async def open_artifact(
        self, workspace_id: str, run_id: str, artifact_id: str, byte_range: ByteRange | None = None
    ) -> ArtifactDownload:
        """:class:`NotFound` for an artifact outside the run (or workspace) or whose bytes are gone,
        :class:`ArtifactNotReady` unless READY, :class:`RangeNotSatisfiable` for a range outside it."""
        async with self._uow(read_only=True) as uow:
            artifact = await uow.artifacts.get(workspace_id, artifact_id)
        if artifact.owner_type is not ArtifactOwnerType.RUN or artifact.owner_id != run_id:
            raise NotFound("artifact", artifact_id)
        if artifact.state is ArtifactState.DELETED:
            raise NotFound("artifact", artifact_id)
        if artifact.state is not ArtifactState.READY:
            raise ArtifactNotReady(artifact_id, artifact.state)
        stored = await self._store.stat(artifact.storage_key)
        if stored is None:
            raise NotFound("artifact", artifact_id)
        size = artifact.size_bytes if artifact.size_bytes is not None else stored.size_bytes
        start, end = (0, size) if byte_range is None else byte_range.resolve(size)
        try:
            chunks = await self._store.open_range(artifact.storage_key, start, end)
        except ArtifactObjectMissing:
            raise NotFound("artifact", artifact_id) from None
        return ArtifactDownload(
            artifact_id=artifact.id,
            artifact_type=artifact.artifact_type,
            file_name=artifact.file_name,
            content_type=artifact.content_type,
            size=size,
            sha256=artifact.sha256,
            start=start,
            end=end,
            partial=byte_range is not None,
            chunks=chunks,
        )
