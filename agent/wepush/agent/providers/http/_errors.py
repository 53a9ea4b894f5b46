"""How HTTP outcomes map to stable Provider error codes and ErrorCategory.

The table is the single source of truth: the session uses it, the descriptor's
claimed categories are derived from it, and the contract suite proves each
claimed category is reachable. Decisions worth knowing:

* 400, 413, 414, 415 and 422 are ``INVALID_REQUEST``: the vendor rejected what
  the message configuration produced; sending the same request again cannot help.
* 404, 405, 409, 410, 501 and any other unlisted 4xx are ``PERMANENT_REMOTE``:
  the endpoint, not the request body, is the problem.
* 408, 425 and every 5xx except 501 are ``TEMPORARY_REMOTE``.
* A transport failure after the request may have reached the vendor (read
  timeout, disconnect mid-response) is only marked retryable for idempotent
  methods, so a POST is never silently sent twice.
* A connection lost mid-request is ``UNKNOWN``, not ``NETWORK``: the vendor may
  have read the whole request and acted on it, so the item must end UNKNOWN
  ("may have been sent"), never FAILED, where "resend the failed items" would
  send it twice. ``NETWORK`` is kept for failures before anything was sent
  (DNS, refused connection, TLS handshake).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from wepush.agent.providers.common import parse_retry_after as common_retry_after
from wepush.agent.providers.spi import ErrorCategory

__all__ = [
    "HTTP_ERROR_TABLE",
    "IDEMPOTENT_METHODS",
    "STATUS_TABLE",
    "ErrorMapping",
    "map_status",
    "parse_retry_after",
]

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

# A vendor asking for more than a day is treated as a day; the engine's own
# deadlines bound the wait further.
_MAX_RETRY_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class ErrorMapping:
    """One row: a stable code, its category and whether a retry is advised."""

    code: str
    category: ErrorCategory
    retryable: bool


def _row(code: str, category: ErrorCategory, retryable: bool) -> ErrorMapping:
    return ErrorMapping(code, category, retryable)


C = ErrorCategory

#: Every non-status outcome the session can produce, keyed by its code.
HTTP_ERROR_TABLE: Mapping[str, ErrorMapping] = MappingProxyType(
    {
        row.code: row
        for row in (
            _row("HTTP_UNAUTHORIZED", C.AUTHENTICATION, False),
            _row("HTTP_FORBIDDEN", C.AUTHORIZATION, False),
            _row("HTTP_RATE_LIMITED", C.RATE_LIMITED, True),
            _row("HTTP_SERVER_ERROR", C.TEMPORARY_REMOTE, True),
            _row("HTTP_CLIENT_REJECTED", C.PERMANENT_REMOTE, False),
            _row("HTTP_BAD_REQUEST", C.INVALID_REQUEST, False),
            _row("HTTP_SUCCESS_CONDITION_NOT_MET", C.PERMANENT_REMOTE, False),
            _row("HTTP_RESPONSE_UNREADABLE", C.UNKNOWN, False),
            _row("HTTP_REDIRECT_NOT_FOLLOWED", C.PERMANENT_REMOTE, False),
            _row("HTTP_TOO_MANY_REDIRECTS", C.PERMANENT_REMOTE, False),
            _row("HTTP_REDIRECT_REFUSED", C.INVALID_REQUEST, False),
            _row("HTTP_ADDRESS_REFUSED", C.INVALID_REQUEST, False),
            _row("HTTP_RECIPIENT_FIELD_MISSING", C.RECIPIENT_INVALID, False),
            _row("HTTP_RECIPIENT_VALUE_INVALID", C.RECIPIENT_INVALID, False),
            _row("HTTP_CONNECT_FAILED", C.NETWORK, True),
            _row("HTTP_TLS_FAILED", C.NETWORK, False),
            _row("HTTP_CONNECTION_LOST", C.UNKNOWN, False),
            _row("HTTP_PROTOCOL_ERROR", C.UNKNOWN, False),
            # Nothing was sent: a failure to reach the vendor (retried, FAILED in the end), not a
            # timeout that may hide a delivered message (never retried unless safe, UNKNOWN).
            _row("HTTP_CONNECT_TIMEOUT", C.NETWORK, True),
            _row("HTTP_TIMEOUT", C.TIMEOUT, False),
            _row("HTTP_CANCELLED", C.CANCELLED, False),
            _row("HTTP_INTERNAL_ERROR", C.INTERNAL, False),
        )
    }
)

_T = HTTP_ERROR_TABLE

#: Explicit status rows; :func:`map_status` covers the rest by class.
STATUS_TABLE: Mapping[int, ErrorMapping] = MappingProxyType(
    {
        400: _T["HTTP_BAD_REQUEST"],
        401: _T["HTTP_UNAUTHORIZED"],
        403: _T["HTTP_FORBIDDEN"],
        404: _T["HTTP_CLIENT_REJECTED"],
        405: _T["HTTP_CLIENT_REJECTED"],
        408: _T["HTTP_SERVER_ERROR"],
        409: _T["HTTP_CLIENT_REJECTED"],
        410: _T["HTTP_CLIENT_REJECTED"],
        413: _T["HTTP_BAD_REQUEST"],
        414: _T["HTTP_BAD_REQUEST"],
        415: _T["HTTP_BAD_REQUEST"],
        422: _T["HTTP_BAD_REQUEST"],
        425: _T["HTTP_SERVER_ERROR"],
        429: _T["HTTP_RATE_LIMITED"],
        501: _T["HTTP_CLIENT_REJECTED"],
    }
)


def map_status(status: int) -> ErrorMapping:
    """The mapping for a non-successful HTTP status (3xx handled by the caller)."""
    explicit = STATUS_TABLE.get(status)
    if explicit is not None:
        return explicit
    if status >= 500:
        return _T["HTTP_SERVER_ERROR"]
    return _T["HTTP_CLIENT_REJECTED"]


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """Parse ``Retry-After`` as delta-seconds or an HTTP-date relative to ``now``.

    Returns ``None`` for a missing or malformed header; a date in the past means
    "retry now" (zero). ``now`` must be timezone-aware. Never raises: see
    :func:`wepush.agent.providers.common.parse_retry_after`.
    """
    return common_retry_after(value, now, _MAX_RETRY_AFTER)
