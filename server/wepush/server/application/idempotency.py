"""Idempotency-Key handling: request fingerprints, key hashes and the replay/conflict decision.

The flow (seed: "create Run" transaction): validate the key, look up ``idempotency_record(scope,
key_hash)``, then

* no record → proceed, and save the response under the key in the same transaction;
* a record whose fingerprint matches → replay the stored response, do nothing else;
* a record with another fingerprint → :class:`IdempotencyConflict` (409 ``IDEMPOTENCY_CONFLICT``).

Two concurrent first requests both "proceed"; the UNIQUE(scope, key_hash) constraint lets one commit
and the loser retries the lookup, which then replays or conflicts.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Protocol

from wepush.server.application.errors import FieldIssue

__all__ = [
    "IdempotencyConflict",
    "IdempotencyKeyInvalid",
    "IdempotencyRecordView",
    "Proceed",
    "Replay",
    "decide_idempotency",
    "key_hash",
    "request_fingerprint",
    "validate_idempotency_key",
]

#: As the contract's Idempotency-Key parameter allows.
MAX_KEY_LENGTH: Final = 128


class IdempotencyConflict(Exception):
    """The key was already used for a different request."""

    code: ClassVar[str] = "IDEMPOTENCY_CONFLICT"
    status: ClassVar[int] = 409

    def __init__(self) -> None:
        super().__init__("Idempotency-Key was already used with a different request")


class IdempotencyKeyInvalid(Exception):
    code: ClassVar[str] = "VALIDATION_FAILED"
    status: ClassVar[int] = 400

    def __init__(
        self, message: str = f"Idempotency-Key must be 1..{MAX_KEY_LENGTH} visible ASCII characters"
    ) -> None:
        super().__init__(message)
        self.issues = (FieldIssue("Idempotency-Key", "INVALID", str(self)),)


def validate_idempotency_key(key: str) -> str:
    """Accept 1..128 visible ASCII characters; anything else would be ambiguous in logs and headers."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all("!" <= ch <= "~" for ch in key):
        raise IdempotencyKeyInvalid()
    return key


def _canonical_json(value: object) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _body_digest(body: bytes | bytearray | object) -> bytes:
    if body is None:
        return hashlib.sha256(b"none:").digest()
    if isinstance(body, (bytes, bytearray)):
        if not body:
            return hashlib.sha256(b"none:").digest()
        try:
            parsed = json.loads(body)
        except ValueError:
            # Not JSON (an upload, form data): the exact bytes are the request.
            return hashlib.sha256(b"raw:" + bytes(body)).digest()
        return hashlib.sha256(b"json:" + _canonical_json(parsed)).digest()
    return hashlib.sha256(b"json:" + _canonical_json(body)).digest()


def request_fingerprint(method: str, path: str, body: bytes | bytearray | object) -> str:
    """SHA-256 (hex) of method, path and the body's canonical JSON.

    Pass the path with its query string when the query changes what the request does.

    Key order and whitespace do not change a JSON body's fingerprint, so a client retrying with a
    re-serialized body still replays; ``b""``, ``None`` and no body are the same request.
    """
    hasher = hashlib.sha256()
    for part in (method.upper().encode("ascii"), path.encode("utf-8"), _body_digest(body)):
        hasher.update(struct.pack(">I", len(part)))
        hasher.update(part)
    return hasher.hexdigest()


def key_hash(scope: str, key: str) -> str:
    """SHA-256 (hex) of (scope, key): bounded size, and the raw client key is never stored."""
    hasher = hashlib.sha256()
    for part in (scope.encode("utf-8"), key.encode("utf-8")):
        hasher.update(struct.pack(">I", len(part)))
        hasher.update(part)
    return hasher.hexdigest()


class IdempotencyRecordView(Protocol):
    """The stored record fields the decision needs (a repository row mapped to anything with these)."""

    @property
    def request_fingerprint(self) -> str: ...

    @property
    def response_status(self) -> int: ...

    @property
    def response_body(self) -> Mapping[str, object] | None: ...


@dataclass(frozen=True, slots=True)
class Proceed:
    """Execute the request and store its response under the key."""


@dataclass(frozen=True, slots=True)
class Replay:
    """Return the stored response instead of executing again."""

    status: int
    body: Mapping[str, object] | None


def decide_idempotency(record: IdempotencyRecordView | None, fingerprint: str) -> Proceed | Replay:
    """Pure decision for one request; raises :class:`IdempotencyConflict` on a fingerprint mismatch."""
    if record is None:
        return Proceed()
    if record.request_fingerprint != fingerprint:
        raise IdempotencyConflict()
    return Replay(status=record.response_status, body=record.response_body)
