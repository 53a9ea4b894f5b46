"""Small value helpers shared by every aggregate: ids, time, canonical JSON, hashes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

import uuid_utils

JsonObject: TypeAlias = dict[str, Any]
"""A JSON object as stored in a ``*_json`` column (already validated by the caller)."""

Clock: TypeAlias = Callable[[], datetime]
"""Returns the current instant, timezone-aware UTC."""


def new_id() -> str:
    """A new opaque resource id: a UUIDv7 string, so ids sort by creation time."""
    return str(uuid_utils.uuid7())


def utc_now() -> datetime:
    """The system clock in UTC; tests pass their own :data:`Clock` instead."""
    return datetime.now(UTC)


def canonical_json(value: object) -> str:
    """The one canonical JSON text form: sorted keys, compact separators, UTF-8 kept readable.

    Content hashes, checksums and the SQLite JSON columns all use this form, so equal documents
    always produce equal bytes on every database.
    """
    return _CANONICAL.encode(value)


# Built once: ``json.dumps`` with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


#: From 1e21 on, JSON writers (ECMAScript's, RFC 8785's canonical form) spell a number in exponent form,
#: so only smaller whole floats are the integers a client meant. Every whole float is an exact integer;
#: one past 2**53 (1e20) is the integer closest to what the client wrote, as any JSON reader takes it.
_INTEGER_FORM_BELOW = 10**21


def plain_numbers(document: Any) -> Any:
    """``document`` with every float that is a whole number written as an integer (4096.0 → 4096).

    JSON has one number type: a client that serialises floats sends ``4096.0`` where another sends
    ``4096``, and both mean the same content. Stored content uses the integer form, so comparing, hashing
    and what a provider reads never depend on how the client spelt a number."""
    if isinstance(document, float):
        if document.is_integer() and abs(document) < _INTEGER_FORM_BELOW:
            return int(document)
        return document
    if isinstance(document, dict):
        return {key: plain_numbers(value) for key, value in document.items()}
    if isinstance(document, list):
        return [plain_numbers(value) for value in document]
    return document


def content_hash(document: object) -> str:
    """SHA-256 of the canonical JSON form of ``document``."""
    return sha256_hex(canonical_json(document))


def hash_token(token: str) -> str:
    """The irreversible form in which bearer tokens (API, enrollment, fencing) are stored."""
    return sha256_hex(token)
