"""Turning a vendor's HTTP answer into a classified ProviderResult.

A provider-specific reader extracts a :class:`VendorReply` (code, message,
request id) from the JSON body; :func:`judge` does the rest the same way for
every vendor: a listed vendor code wins, an unlisted one is a permanent vendor
error, a body without a code falls back to the HTTP status, and a 2xx without a
readable result is UNKNOWN because the message may have been delivered.
Diagnostics quote at most a short, masked snippet of the vendor's message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from wepush.agent.providers.common import parse_retry_after
from wepush.agent.providers.spi import ErrorCategory, ProviderResult

from ._errors import ErrorRow, ErrorTable
from ._http import VendorResponse

__all__ = ["VendorReply", "errcode_reply", "judge", "snippet", "status_row"]

_SNIPPET_CHARS = 120
_MAX_RETRY_AFTER = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class VendorReply:
    """What a vendor's JSON answer says about one call."""

    code: str
    ok: bool
    message: str = ""
    request_id: str | None = None
    #: Table key when it differs from ``code`` (a vendor reusing one code for several causes).
    key: str | None = None


def snippet(text: str, mask: Callable[[str], str]) -> str:
    collapsed = " ".join(text.split())
    collapsed = mask(collapsed[: _SNIPPET_CHARS * 2])
    return collapsed if len(collapsed) <= _SNIPPET_CHARS else collapsed[:_SNIPPET_CHARS] + "…"


def status_row(table: ErrorTable, status: int) -> ErrorRow:
    if status == 401:
        return table.local("HTTP_UNAUTHORIZED")
    if status == 403:
        return table.local("HTTP_FORBIDDEN")
    if status == 429:
        return table.local("HTTP_RATE_LIMITED")
    if status >= 500:
        return table.local("HTTP_SERVER_ERROR")
    return table.local("HTTP_REJECTED")


def _retry_after(response: VendorResponse, found: ErrorRow, now: datetime | None) -> timedelta | None:
    """The ``Retry-After`` delay that counts for ``found``.

    It counts on a rate limit (HTTP 429 or a vendor's rate-limit code) and on a
    503 worth retrying, where RFC 9110 §10.2.3 lets a server say how long it will
    be unavailable; on anything else it is ignored.
    """
    if found.category is not ErrorCategory.RATE_LIMITED and not (response.status == 503 and found.retryable):
        return None
    value = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), None)
    return parse_retry_after(value, now or datetime.now(UTC), _MAX_RETRY_AFTER)


def errcode_reply(document: dict[str, Any], *, request_id_key: str = "msgid") -> VendorReply | None:
    """The ``{"errcode": 0, "errmsg": "ok"}`` convention of WeChat, WeCom and DingTalk."""
    code = document.get("errcode")
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    request_id = document.get(request_id_key)
    return VendorReply(
        code=str(code),
        ok=code == 0,
        message=str(document.get("errmsg", "")),
        request_id=None if request_id in (None, "") else str(request_id),
    )


def judge(
    response: VendorResponse,
    reply: VendorReply | None,
    table: ErrorTable,
    *,
    vendor: str,
    mask: Callable[[str], str],
    now: datetime | None = None,
) -> ProviderResult:
    """The result of one vendor answer; ``now`` (default: the wall clock) dates a ``Retry-After``."""
    status = response.status
    success_status = 200 <= status < 300
    if reply is not None:
        if reply.ok and success_status:
            return ProviderResult.ok("OK", external_request_id=reply.request_id)
        if not reply.ok:
            listed = table.for_vendor(reply.key or reply.code)
            found = listed or (table.local("VENDOR_ERROR") if success_status else status_row(table, status))
            detail = snippet(reply.message, mask)
            return table.fail(
                found,
                f"HTTP {status}, {vendor} code {reply.code}" + (f": {detail}" if detail else ""),
                retry_after=_retry_after(response, found, now),
                external_request_id=reply.request_id,
            )
    if success_status:
        why = "cut off" if response.truncated else "without a readable result"
        return table.fail(table.local("RESPONSE_UNREADABLE"), f"HTTP {status} {why}; delivery is unconfirmed")
    found = status_row(table, status)
    return table.fail(found, f"HTTP {status} from {vendor}", retry_after=_retry_after(response, found, now))
