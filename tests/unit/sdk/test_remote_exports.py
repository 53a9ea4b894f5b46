"""The remote SDK's public surface is deliberate; ``wepush.sdk`` re-exports it."""

from __future__ import annotations

import wepush.sdk as sdk
import wepush.sdk.remote as remote

REMOTE_API = {
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
}


def test_remote_sdk_exports_exactly_its_curated_names() -> None:
    assert set(remote.__all__) == REMOTE_API
    assert all(hasattr(remote, name) for name in remote.__all__)


def test_package_root_re_exports_the_remote_entry_points() -> None:
    for name in ("WePushClient", "WorkspaceClient", "EventSubscription", "WePushError", "ProblemError"):
        assert name in sdk.__all__
        assert getattr(sdk, name) is getattr(remote, name)
