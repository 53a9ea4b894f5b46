"""The per-task log context (traceId, workspaceId, runId ...) that every log line carries.

A ``contextvars.ContextVar`` follows asyncio tasks: what a request handler binds is seen by everything it
awaits and by tasks it spawns, and never leaks into a concurrent request.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType, TracebackType
from typing import Final

__all__ = [
    "LOG_CONTEXT_FIELDS",
    "LogContextBinding",
    "bind_log_context",
    "current_log_context",
    "current_trace_id",
]

# Emitted names, in the seed's order.
LOG_CONTEXT_FIELDS: Final = ("traceId", "workspaceId", "runId", "agentId", "leaseId", "providerId")

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})
_log_context: ContextVar[Mapping[str, str]] = ContextVar("wepush_log_context", default=_EMPTY)


class LogContextBinding:
    """Undoes one :func:`bind_log_context`; usable as a context manager or via :meth:`reset`."""

    __slots__ = ("_done", "_token")

    def __init__(self, token: Token[Mapping[str, str]]) -> None:
        self._token = token
        self._done = False

    def __enter__(self) -> LogContextBinding:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.reset()

    def reset(self) -> None:
        if not self._done:
            self._done = True
            _log_context.reset(self._token)


def bind_log_context(
    *,
    trace_id: object | None = None,
    workspace_id: object | None = None,
    run_id: object | None = None,
    agent_id: object | None = None,
    lease_id: object | None = None,
    provider_id: object | None = None,
) -> LogContextBinding:
    """Add fields to the current log context (``None`` leaves a field as it was) until reset."""
    given = {
        "traceId": trace_id,
        "workspaceId": workspace_id,
        "runId": run_id,
        "agentId": agent_id,
        "leaseId": lease_id,
        "providerId": provider_id,
    }
    merged = dict(_log_context.get())
    merged.update({name: str(value) for name, value in given.items() if value is not None})
    return LogContextBinding(_log_context.set(MappingProxyType(merged)))


def current_log_context() -> Mapping[str, str]:
    """The bound fields, keyed by their emitted camelCase names."""
    return _log_context.get()


def current_trace_id() -> str | None:
    return _log_context.get().get("traceId")
