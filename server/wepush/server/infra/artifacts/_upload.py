"""What every store's upload does with each write: refuse it once finished, hash it, count it, buffer it."""

from __future__ import annotations

import hashlib
from typing import TypeVar

from wepush.server.application.execution import ArtifactUpload

__all__ = ["HashingUpload", "own"]

U = TypeVar("U", bound="HashingUpload")


class HashingUpload:
    """The bytes of one upload until the store sends them on; SHA-256 and size cover every byte written."""

    def __init__(self, key: str) -> None:
        self._key = key
        self.digest = hashlib.sha256()
        self.size = 0
        self.buffer = bytearray()
        self.finished = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def size_bytes(self) -> int:
        return self.size

    def accept(self, data: bytes) -> None:
        if self.finished:
            raise RuntimeError("the upload is already completed or aborted")
        self.digest.update(data)
        self.size += len(data)
        self.buffer += data

    def take_buffer(self) -> bytes:
        data, self.buffer = bytes(self.buffer), bytearray()
        return data


def own(upload: ArtifactUpload, kind: type[U]) -> U:
    """``upload`` as this store's own, still open, upload."""
    if not isinstance(upload, kind):
        raise TypeError("the upload was not started by this store")
    if upload.finished:
        raise RuntimeError("the upload is already completed or aborted")
    return upload
