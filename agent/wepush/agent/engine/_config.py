"""Immutable provider configuration documents and provider references."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["JSON_MEDIA_TYPE", "ConfigDocument", "ProviderRef", "canonical_json"]

JSON_MEDIA_TYPE = "application/json"


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no insignificant whitespace, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


@dataclass(frozen=True, slots=True)
class ConfigDocument:
    """A provider configuration that crosses the engine boundary as opaque canonical bytes.

    The engine never interprets the content; the provider parses it into its own typed configuration.
    Secrets are never inlined: configurations carry ``SecretRef`` objects rendered as references.
    """

    schema_id: str
    schema_version: str
    media_type: str
    content: bytes

    def __post_init__(self) -> None:
        # bytes is immutable, but a bytearray or memoryview would let the caller mutate a "frozen" document.
        if not isinstance(self.content, bytes):
            object.__setattr__(self, "content", bytes(self.content))

    @classmethod
    def from_json(cls, schema_id: str, schema_version: str, obj: Any) -> ConfigDocument:
        return cls(schema_id, schema_version, JSON_MEDIA_TYPE, canonical_json(obj))

    def json(self) -> Any:
        """Parse a JSON document; raises ``ValueError`` for another media type or malformed content."""
        if self.media_type != JSON_MEDIA_TYPE:
            raise ValueError(f"config document {self.schema_id} is {self.media_type}, not JSON")
        return json.loads(self.content.decode("utf-8"))

    def __repr__(self) -> str:
        # Content is left out: it is user data and may be large.
        return (
            f"ConfigDocument(schema_id={self.schema_id!r}, schema_version={self.schema_version!r}, "
            f"media_type={self.media_type!r}, content=<{len(self.content)} bytes>)"
        )


@dataclass(frozen=True, slots=True)
class ProviderRef:
    """Which provider implementation a run uses (``id`` is the descriptor's provider_id)."""

    id: str
    version: str | None = None
