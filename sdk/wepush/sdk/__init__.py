"""WePush Next SDKs.

- :mod:`wepush.sdk.remote` talks to a running Service over its REST API and SSE (``WePushClient``).
- :mod:`wepush.sdk.embedded` runs the engine inside an application, without a Service (``WePushEngine``).

The remote entry points are re-exported here and imported lazily on first use, so an application that only
embeds the engine never loads the HTTP stack or the generated client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .remote import (
        AsyncEventSubscription,
        CursorExpired,
        EventSubscription,
        InvalidRequest,
        ProblemError,
        ReconnectPolicy,
        RetryPolicy,
        RunEventMessage,
        TransportError,
        WePushClient,
        WePushError,
        WorkspaceClient,
    )

__all__ = [
    "AsyncEventSubscription",
    "CursorExpired",
    "EventSubscription",
    "InvalidRequest",
    "ProblemError",
    "ReconnectPolicy",
    "RetryPolicy",
    "RunEventMessage",
    "TransportError",
    "WePushClient",
    "WePushError",
    "WorkspaceClient",
]

_REMOTE = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name in _REMOTE:
        return getattr(importlib.import_module("wepush.sdk.remote"), name)
    raise AttributeError(f"module 'wepush.sdk' has no attribute {name!r}")
