"""How a preview reports a Recipient it cannot render."""

from __future__ import annotations

from wepush.agent.providers.spi import PreviewResult

__all__ = ["failed_preview"]


def failed_preview(code: str | None, message: str | None) -> PreviewResult:
    """No rendered text, and the error a send would report, in one shape for every channel."""
    return PreviewResult("text/plain", "", {"error": {"code": code, "message": message}})
