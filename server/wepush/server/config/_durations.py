"""ISO-8601 durations (``PT1S``, ``PT0.5S``, ``P1DT2H``) as used throughout the configuration."""

from __future__ import annotations

import re
from datetime import timedelta

_PATTERN = re.compile(
    r"^P(?!$)(?:(?P<days>\d+)D)?(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """Parse an ISO-8601 duration limited to days, hours, minutes and (fractional) seconds."""
    match = _PATTERN.match(text.strip().upper()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r} (expected e.g. PT1S, PT15M, P1D)")
    parts = {key: float(value) for key, value in match.groupdict().items() if value is not None}
    return timedelta(
        days=parts.get("days", 0.0),
        hours=parts.get("hours", 0.0),
        minutes=parts.get("minutes", 0.0),
        seconds=parts.get("seconds", 0.0),
    )


def format_duration(value: timedelta) -> str:
    """Render a timedelta as the shortest ISO-8601 seconds form (``PT1.5S``)."""
    seconds = value.total_seconds()
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"PT{text}S"
