"""ISO-8601 durations (``PT1S``, ``PT0.5S``, ``P1DT2H``) as used throughout the configuration: the same
grammar as every duration on the wire (the engine's), so a value copied from a job's policies reads the
same in the configuration file."""

from __future__ import annotations

from datetime import timedelta

from wepush.agent.engine import parse_duration as parse_wire_duration

__all__ = ["parse_duration"]


def parse_duration(text: str) -> timedelta:
    """Parse an ISO-8601 day-time duration; ValueError (never OverflowError) says what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"not an ISO-8601 duration: {text!r} (expected e.g. PT1S, PT15M, P1D)")
    try:
        return parse_wire_duration(text)
    except ValueError as error:
        raise ValueError(f"{error} (expected e.g. PT1S, PT15M, P1D)") from None
