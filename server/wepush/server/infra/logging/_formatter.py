"""Structured log output: one redacted JSON object per line, and a redacted text format for development."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import traceback
from datetime import UTC, datetime
from typing import Final, Literal, TextIO

from wepush.server.infra.logging._context import LOG_CONTEXT_FIELDS, current_log_context
from wepush.server.infra.logging._redactor import Redactor

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging", "get_redactor"]

_DEFAULT_REDACTOR: Final = Redactor()

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is a structured field.
_RECORD_ATTRIBUTES: Final = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
# uvicorn repeats its message with ANSI colours for terminals; in a structured line it is only noise.
_DROPPED_EXTRAS: Final = frozenset({"color_message"})
_SNAKE_TO_CONTEXT: Final = {
    "trace_id": "traceId",
    "workspace_id": "workspaceId",
    "run_id": "runId",
    "agent_id": "agentId",
    "lease_id": "leaseId",
    "provider_id": "providerId",
}
_RESERVED: Final = frozenset(
    {"timestamp", "level", "service", "instanceId", "event", "logger", "message", "exception", "stack"}
    | set(LOG_CONTEXT_FIELDS)
)
# json.dumps already escapes U+0000..U+001F; these are the other characters that break terminals or
# line-oriented log shippers when left raw.
_EXTRA_CONTROL_ESCAPES: Final = {
    code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)
}
_TEXT_CONTROL_ESCAPES: Final = {
    **{code: f"\\x{code:02x}" for code in range(0x20)},
    0x09: "\\t",
    0x0A: "\\n",
    0x0D: "\\r",
    **_EXTRA_CONTROL_ESCAPES,
}
_installed_handlers: list[logging.Handler] = []


def get_redactor() -> Redactor:
    """The process-wide Redactor: the one that log formatters, error details and diagnostics share."""
    return _DEFAULT_REDACTOR


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _structured_fields(record: logging.LogRecord) -> dict[str, object]:
    """Context fields (bound ones overridden by ``extra=``) and the other ``extra=`` fields."""
    fields: dict[str, object] = dict.fromkeys(LOG_CONTEXT_FIELDS)
    fields.update(current_log_context())
    for name, value in vars(record).items():
        if name in _RECORD_ATTRIBUTES or name in _DROPPED_EXTRAS or name.startswith("_"):
            continue
        fields[_SNAKE_TO_CONTEXT.get(name, name)] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the seed's fields, every value passed through the Redactor.

    ``logger.info("lease granted", extra={"event": "LEASE_GRANTED", "runId": run_id, "epoch": 3})``
    """

    def __init__(self, *, service: str, instance_id: str, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._service = service
        self._instance_id = instance_id
        self._redactor = redactor or _DEFAULT_REDACTOR

    def format(self, record: logging.LogRecord) -> str:
        redactor = self._redactor
        fields = _structured_fields(record)
        entry: dict[str, object] = {
            "timestamp": _timestamp(record),
            "level": record.levelname,
            "service": self._service,
            "instanceId": self._instance_id,
        }
        for name in LOG_CONTEXT_FIELDS:
            entry[name] = redactor.redact(fields.pop(name))
        entry["event"] = redactor.redact(fields.pop("event", None))
        entry["message"] = redactor.text(record.getMessage())
        entry["logger"] = record.name
        for name, value in fields.items():
            if name not in _RESERVED:
                entry[name] = redactor.field(name, value)
        if record.exc_info and record.exc_info[1] is not None:
            entry["exception"] = redactor.exception(record.exc_info[1])
        elif record.exc_text:
            entry["exception"] = redactor.text(record.exc_text)
        if record.stack_info:
            entry["stack"] = redactor.text(record.stack_info)
        line = json.dumps(entry, ensure_ascii=False, default=str)
        return line.translate(_EXTRA_CONTROL_ESCAPES)


class TextFormatter(logging.Formatter):
    """Human-readable development format; redacted, control characters in the message escaped."""

    def __init__(self, *, service: str, instance_id: str, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._service = service
        self._instance_id = instance_id
        self._redactor = redactor or _DEFAULT_REDACTOR

    def format(self, record: logging.LogRecord) -> str:
        redactor = self._redactor
        fields = _structured_fields(record)
        context = " ".join(
            f"{name}={redactor.field(name, value)}"
            for name, value in fields.items()
            if value is not None and (name in LOG_CONTEXT_FIELDS or name == "event" or name not in _RESERVED)
        )
        message = redactor.text(record.getMessage()).translate(_TEXT_CONTROL_ESCAPES)
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name} {message}"
        if context:
            line = f"{line} [{context.translate(_TEXT_CONTROL_ESCAPES)}]"
        if record.exc_info and record.exc_info[1] is not None:
            exception = redactor.text("".join(traceback.format_exception(record.exc_info[1])))
            # Keep the traceback's own line breaks; escape every other control character.
            escapes = {k: v for k, v in _TEXT_CONTROL_ESCAPES.items() if k != 0x0A}
            line = f"{line}\n{exception.rstrip().translate(escapes)}"
        return line


def configure_logging(
    level: str | int = "INFO",
    fmt: Literal["json", "text"] = "json",
    service: str = "wepush-server",
    instance_id: str | None = None,
    *,
    stream: TextIO | None = None,
    redactor: Redactor | None = None,
) -> logging.Handler:
    """Route the root logger (and uvicorn's loggers) through one redacting handler.

    Calling it again replaces the handler it installed before, leaving other handlers alone.
    """
    instance = instance_id or f"{socket.gethostname()}-{os.getpid()}"
    formatter: logging.Formatter
    if fmt == "json":
        formatter = JsonFormatter(service=service, instance_id=instance, redactor=redactor)
    elif fmt == "text":
        formatter = TextFormatter(service=service, instance_id=instance, redactor=redactor)
    else:
        raise ValueError(f"unknown log format {fmt!r}; expected 'json' or 'text'")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    while _installed_handlers:
        previous = _installed_handlers.pop()
        root.removeHandler(previous)
        previous.close()
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    _installed_handlers.append(handler)
    # uvicorn installs its own unredacted handlers; send its records through ours instead.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        server_logger = logging.getLogger(name)
        server_logger.handlers.clear()
        server_logger.propagate = True
    return handler
