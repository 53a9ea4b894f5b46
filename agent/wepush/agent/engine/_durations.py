"""ISO-8601 durations (``PT30S``) and UTC instants: the unit-bearing forms timeouts take on the wire."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["format_duration", "format_instant", "parse_duration"]

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """Parse the day-time subset of ISO-8601 durations (years and months have no fixed length)."""
    match = _DURATION.match(text.strip().upper())
    if match is None or text.strip().upper() in {"P", "PT"} or text.strip().upper().endswith("T"):
        raise ValueError(f"not an ISO-8601 day-time duration: {text!r}")
    parts = {name: float(value) for name, value in match.groupdict().items() if value is not None}
    try:
        return timedelta(
            days=parts.get("days", 0.0),
            hours=parts.get("hours", 0.0),
            minutes=parts.get("minutes", 0.0),
            seconds=parts.get("seconds", 0.0),
        )
    except OverflowError:
        # timedelta tops out near 2.7 million years; anything longer is a typo, not a timeout.
        raise ValueError(f"duration out of range: {text!r}") from None


def format_duration(value: timedelta) -> str:
    """Format as ``PT<seconds>S`` (fractional seconds kept to the microsecond)."""
    if value < timedelta(0):
        raise ValueError("durations are never negative")
    seconds = value.total_seconds()
    text = f"{seconds:.6f}".rstrip("0").rstrip(".")
    return f"PT{text}S"


def format_instant(value: datetime) -> str:
    """UTC ISO-8601 with a ``Z`` suffix, e.g. ``2026-08-22T08:30:00Z``."""
    tz = value.tzinfo
    if tz is None:
        raise ValueError("instants must be timezone-aware")
    # The engine's clocks hand out UTC instants: skip the conversion for them (once per item result).
    utc = value if tz is UTC else value.astimezone(UTC)
    text = utc.isoformat(timespec="milliseconds" if utc.microsecond else "seconds")
    return text[:-6] + "Z"
