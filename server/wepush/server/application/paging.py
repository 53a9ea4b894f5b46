"""Cursor pagination: opaque HMAC-protected keyset cursors and the ``limit + 1`` page helper.

A cursor is ``base64url(payload JSON) "." base64url(HMAC-SHA-256 tag)``. The payload binds

* ``r`` the resource name (``"runs"``, ``"audit-events"`` ...),
* ``f`` a hash of the normalized filters (name, state, time range ...),
* ``k`` the keyset position after which the next page starts (e.g. ``[created_at ISO, id]``),
* ``t`` the issue time (epoch seconds).

So a cursor cannot be forged, cannot be replayed against another resource, and cannot be reused with
different filters; the payload names no table or column. Every refusal is :class:`CursorInvalid`, which
the API maps to 400 ``CURSOR_INVALID``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import ClassVar, Final, Generic, Literal, TypeVar

from wepush.server.application._b64 import b64decode_canonical, b64encode_unpadded

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "CursorCodec",
    "CursorInvalid",
    "KeysetValue",
    "Page",
    "PageLimitInvalid",
    "validate_limit",
]

DEFAULT_PAGE_LIMIT: Final = 50
MAX_PAGE_LIMIT: Final = 100
_MAX_CURSOR_CHARS: Final = 2048
_MIN_KEY_BYTES: Final = 32
_TAG_DOMAIN: Final = b"wepush/cursor/v1."
_FILTER_HASH_BYTES: Final = 16

KeysetValue = str | int
T = TypeVar("T")

CursorRejection = Literal["malformed", "tampered", "resource", "filters", "expired"]


class CursorInvalid(Exception):
    """The cursor was tampered with, issued for another resource or other filters, or is too old.

    ``reason`` is for logs and tests; clients only ever see the generic message.
    """

    code: ClassVar[str] = "CURSOR_INVALID"
    status: ClassVar[int] = 400

    def __init__(self, reason: CursorRejection) -> None:
        super().__init__("cursor is invalid for this request")
        self.reason: CursorRejection = reason


class PageLimitInvalid(Exception):
    code: ClassVar[str] = "VALIDATION_FAILED"
    status: ClassVar[int] = 400

    def __init__(self) -> None:
        super().__init__(f"limit must be an integer between 1 and {MAX_PAGE_LIMIT}")


def validate_limit(limit: int | None) -> int:
    """The page size to use: ``None`` means the default (50); anything outside 1..100 is refused."""
    if limit is None:
        return DEFAULT_PAGE_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise PageLimitInvalid()
    return limit


def _normalize(value: object) -> object:
    """Filters as a canonical JSON value: unset filters vanish, sets sort, datetimes become UTC ISO."""
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise ValueError("filter datetimes must be timezone-aware")
        return value.astimezone(UTC).isoformat()
    if isinstance(value, Enum):
        return _normalize(value.value)
    if isinstance(value, Mapping):
        return {
            str(k): _normalize(v)
            for k, v in sorted(value.items(), key=lambda item: str(item[0]))
            if v is not None and v != [] and v != ()
        }
    if isinstance(value, (set, frozenset)):
        return sorted((_normalize(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot bind a filter of type {type(value).__name__} into a cursor")


def filters_digest(filters: Mapping[str, object]) -> str:
    canonical = json.dumps(_normalize(filters), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return b64encode_unpadded(hashlib.sha256(canonical.encode("utf-8")).digest()[:_FILTER_HASH_BYTES])


class CursorCodec:
    """Encodes and verifies cursors with a server-wide key (the same on every Service instance)."""

    __slots__ = ("_clock", "_key")

    def __init__(self, secret_key: bytes, *, clock: Callable[[], datetime] | None = None) -> None:
        if len(secret_key) < _MIN_KEY_BYTES:
            raise ValueError(f"cursor key must be at least {_MIN_KEY_BYTES} bytes")
        self._key = bytes(secret_key)
        self._clock = clock or (lambda: datetime.now(UTC))

    def __repr__(self) -> str:
        return "CursorCodec(secret_key=***)"

    def _tag(self, payload_text: str) -> bytes:
        return hmac.new(self._key, _TAG_DOMAIN + payload_text.encode("ascii"), hashlib.sha256).digest()

    def encode(
        self,
        *,
        resource: str,
        filters: Mapping[str, object],
        position: Sequence[KeysetValue],
    ) -> str:
        """A cursor meaning "the page after ``position``" for this resource and these filters."""
        payload = {
            "v": 1,
            "r": resource,
            "f": filters_digest(filters),
            "k": list(position),
            "t": int(self._clock().timestamp()),
        }
        payload_text = b64encode_unpadded(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
        return f"{payload_text}.{b64encode_unpadded(self._tag(payload_text))}"

    def decode(
        self,
        cursor: str,
        *,
        resource: str,
        filters: Mapping[str, object],
        max_age: timedelta | None = None,
    ) -> tuple[KeysetValue, ...]:
        """Verify ``cursor`` for this request and return its keyset position."""
        if not cursor or len(cursor) > _MAX_CURSOR_CHARS or not cursor.isascii():
            raise CursorInvalid("malformed")
        payload_text, sep, tag_text = cursor.partition(".")
        if not sep:
            raise CursorInvalid("malformed")
        try:
            tag = b64decode_canonical(tag_text)
        except ValueError:
            raise CursorInvalid("malformed") from None
        # The tag is checked before the payload is even parsed: unauthenticated input is never interpreted.
        if not hmac.compare_digest(tag, self._tag(payload_text)):
            raise CursorInvalid("tampered")
        try:
            payload = json.loads(b64decode_canonical(payload_text))
        except ValueError:
            raise CursorInvalid("malformed") from None
        if not isinstance(payload, dict) or payload.get("v") != 1:
            raise CursorInvalid("malformed")
        position = payload.get("k")
        issued_at = payload.get("t")
        if not isinstance(position, list) or not all(
            isinstance(v, (str, int)) and not isinstance(v, bool) for v in position
        ):
            raise CursorInvalid("malformed")
        if not isinstance(issued_at, int):
            raise CursorInvalid("malformed")
        if payload.get("r") != resource:
            raise CursorInvalid("resource")
        if not hmac.compare_digest(str(payload.get("f")), filters_digest(filters)):
            raise CursorInvalid("filters")
        if max_age is not None and self._clock().timestamp() - issued_at > max_age.total_seconds():
            raise CursorInvalid("expired")
        return tuple(position)

    def encode_keyset(self, *, resource: str, filters: Mapping[str, object], at: datetime, id: str) -> str:
        """Cursor for the common ``(timestamp, id)`` ordering (the domain's ``Keyset(at, id)``)."""
        if at.utcoffset() is None:
            raise ValueError("keyset timestamps must be timezone-aware")
        return self.encode(resource=resource, filters=filters, position=(at.astimezone(UTC).isoformat(), id))

    def decode_keyset(
        self,
        cursor: str,
        *,
        resource: str,
        filters: Mapping[str, object],
        max_age: timedelta | None = None,
    ) -> tuple[datetime, str]:
        """The ``(at, id)`` position of a cursor made by :meth:`encode_keyset`."""
        position = self.decode(cursor, resource=resource, filters=filters, max_age=max_age)
        if len(position) != 2 or not all(isinstance(v, str) for v in position):
            raise CursorInvalid("malformed")
        at_text, row_id = str(position[0]), str(position[1])
        try:
            at = datetime.fromisoformat(at_text)
        except ValueError:
            raise CursorInvalid("malformed") from None
        if at.utcoffset() is None:
            raise CursorInvalid("malformed")
        return at, row_id


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing, as the API renders ``{"items": [...], "page": {"nextCursor", "hasMore"}}``."""

    items: list[T]
    next_cursor: str | None
    has_more: bool

    @classmethod
    def from_rows(cls, rows: Sequence[T], limit: int, cursor_after: Callable[[T], str]) -> Page[T]:
        """Build a page from the ``limit + 1`` rows the repository fetched.

        The extra row only proves there is more; it is not returned, and the next cursor points after the
        last returned item.
        """
        has_more = len(rows) > limit
        items = list(rows[:limit])
        next_cursor = cursor_after(items[-1]) if has_more and items else None
        return cls(items=items, next_cursor=next_cursor, has_more=has_more)
