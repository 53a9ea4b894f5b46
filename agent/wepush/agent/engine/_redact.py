"""Best-effort redaction of credentials from diagnostic text before it leaves a provider or the engine."""

from __future__ import annotations

import re

__all__ = ["DIAGNOSTIC_MAX_CHARS", "redact_diagnostic"]

DIAGNOSTIC_MAX_CHARS = 1024

_MASK = "******"
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"(?i)(authorization|proxy-authorization|x-api-key|api[-_]?key)(\s*[:=]\s*)[^\s,;&]+"),
    re.compile(
        r"(?i)(password|passwd|pwd|secret|client[-_]?secret|access[-_]?token|refresh[-_]?token|token|"
        r"signature|sign)(\s*[:=]\s*)\"?[^\s,;&\"]+"
    ),
    re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"),
)


def redact_diagnostic(
    text: str | None, *, secrets: tuple[str, ...] = (), limit: int = DIAGNOSTIC_MAX_CHARS
) -> str | None:
    """Mask known credential shapes and any literal ``secrets``, then cap the length."""
    if text is None:
        return None
    out = text
    for secret in secrets:
        if secret:
            out = out.replace(secret, _MASK)
    out = _PATTERNS[0].sub(lambda m: f"{m.group(1)} {_MASK}", out)
    out = _PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", out)
    out = _PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", out)
    out = _PATTERNS[3].sub(lambda m: f"{m.group(1)}{_MASK}@", out)
    if len(out) > limit:
        out = out[: max(0, limit - 1)] + "…"
    return out
