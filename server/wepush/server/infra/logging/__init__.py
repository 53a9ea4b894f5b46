"""Structured, redacted logging: the one Redactor, the JSON line format and the per-task log context."""

from __future__ import annotations

from wepush.server.infra.logging._context import (
    LOG_CONTEXT_FIELDS,
    LogContextBinding,
    bind_log_context,
    current_log_context,
    current_trace_id,
)
from wepush.server.infra.logging._formatter import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    get_redactor,
)
from wepush.server.infra.logging._redactor import MASK, Redactor, is_sensitive_name

__all__ = [
    "LOG_CONTEXT_FIELDS",
    "MASK",
    "JsonFormatter",
    "LogContextBinding",
    "Redactor",
    "TextFormatter",
    "bind_log_context",
    "configure_logging",
    "current_log_context",
    "current_trace_id",
    "get_redactor",
    "is_sensitive_name",
]
