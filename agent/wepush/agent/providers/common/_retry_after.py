"""Reading a ``Retry-After`` header the same way for every HTTP-speaking channel.

The header is the vendor's text: whatever it holds, reading it never raises, so
a 429 stays a rate limit instead of turning into an internal error.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

__all__ = ["parse_retry_after"]

_ASCII_DIGITS = frozenset("0123456789")


def parse_retry_after(value: str | None, now: datetime, maximum: timedelta) -> timedelta | None:
    """``Retry-After`` as delta-seconds or an HTTP-date relative to ``now``, at most ``maximum``.

    ``None`` for a missing or malformed header; a date in the past means "retry now" (zero).
    ``now`` must be timezone-aware. Only ASCII digits count (``str.isdigit`` accepts ``"²"``,
    which ``int`` refuses), and a number of any length is capped before it becomes a
    ``timedelta`` (which overflows) or meets ``int``'s limit on digits.
    """
    if value is None:
        return None
    text = value.strip()
    if text and set(text) <= _ASCII_DIGITS:
        longest = int(maximum.total_seconds())
        if len(text) > len(str(longest)):
            return maximum
        return min(timedelta(seconds=int(text)), maximum)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are always GMT; a zone-less parse means "-0000".
        return None
    try:
        delay = when - now
    except OverflowError:
        return None
    if delay <= timedelta(0):
        return timedelta(0)
    return min(delay, maximum)
