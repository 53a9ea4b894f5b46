"""Instants the API reads from clients (list filters, a token's expiry), one way for every operation.

The contract's ``date-time`` format has already admitted the text as RFC 3339 by the time a handler
sees it; what is left is what that check cannot tell: whether the instant exists once it is in UTC, the
zone every instant is compared and stored in.
"""

from __future__ import annotations

from datetime import UTC, datetime

from wepush.server.application.errors import FieldIssue, ValidationFailed

__all__ = ["read_instant"]

_EXAMPLE = "2027-01-01T09:30:00+08:00"


def read_instant(field: str, text: str | None) -> datetime | None:
    """``text`` as an aware UTC datetime (None stays None), or a 400 naming ``field``: a JSON pointer
    for a body member (``/expiresAt``), the parameter's name for a query filter."""
    if text is None:
        return None
    name = field.lstrip("/")
    try:
        # RFC 3339 lets the "T" and "Z" be written in lower case; Python reads only upper case.
        value = datetime.fromisoformat(text.upper())
    except ValueError:
        value = None
    if value is None or value.utcoffset() is None:
        raise ValidationFailed(
            f"{name} is not a date-time with a time zone.",
            [
                FieldIssue(
                    field,
                    "INVALID_FORMAT",
                    f"must be an RFC 3339 date-time with an offset, such as {_EXAMPLE}",
                )
            ],
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:00:00+14:00 lies before the first instant a datetime can hold.
        raise ValidationFailed(
            f"{name} lies outside the years 1 to 9999 once in UTC.",
            [
                FieldIssue(
                    field, "OUT_OF_RANGE", "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
                )
            ],
        ) from None
