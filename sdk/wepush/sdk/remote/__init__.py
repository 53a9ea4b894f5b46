"""The remote SDK: a typed, retrying client of a WePush Next Service over its REST API and SSE.

It wraps the generated client (``wepush_client``, from ``contracts/openapi``) by composition and returns
its models; see :class:`WePushClient` for the entry point, :mod:`._retry` for the retry decision table and
:mod:`._events` for event subscriptions.
"""

from __future__ import annotations

from ._client import WePushClient, WorkspaceClient
from ._errors import (
    AccessDenied,
    AuthenticationRequired,
    Conflict,
    CursorExpired,
    FieldError,
    IdempotencyConflict,
    InvalidRequest,
    InvalidResponse,
    NotFound,
    ProblemError,
    RateLimited,
    ResourceInUse,
    RunStateConflict,
    ServiceUnavailable,
    TransportError,
    ValidationFailed,
    VersionConflict,
    WePushError,
)
from ._events import TERMINAL_EVENT_TYPES, AsyncEventSubscription, EventSubscription, RunEventMessage
from ._retry import ReconnectPolicy, RetryPolicy, is_replay_safe, parse_retry_after
from ._sse import ServerSentEvent, SSEDecoder
from ._streams import Download

__all__ = [
    "TERMINAL_EVENT_TYPES",
    "AccessDenied",
    "AsyncEventSubscription",
    "AuthenticationRequired",
    "Conflict",
    "CursorExpired",
    "Download",
    "EventSubscription",
    "FieldError",
    "IdempotencyConflict",
    "InvalidRequest",
    "InvalidResponse",
    "NotFound",
    "ProblemError",
    "RateLimited",
    "ReconnectPolicy",
    "ResourceInUse",
    "RetryPolicy",
    "RunEventMessage",
    "RunStateConflict",
    "SSEDecoder",
    "ServerSentEvent",
    "ServiceUnavailable",
    "TransportError",
    "ValidationFailed",
    "VersionConflict",
    "WePushClient",
    "WePushError",
    "WorkspaceClient",
    "is_replay_safe",
    "parse_retry_after",
]
