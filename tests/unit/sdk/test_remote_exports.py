"""The remote SDK's public surface is deliberate; ``wepush.sdk`` re-exports it."""

from __future__ import annotations

import importlib.resources

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
}


def test_remote_sdk_exports_exactly_its_curated_names() -> None:
    assert set(remote.__all__) == REMOTE_API
    assert all(hasattr(remote, name) for name in remote.__all__)


def test_package_root_re_exports_the_remote_entry_points() -> None:
    for name in (
        "WePushClient",
        "WorkspaceClient",
        "EventSubscription",
        "WePushError",
        "ProblemError",
        "InvalidRequest",
    ):
        assert name in sdk.__all__
        assert getattr(sdk, name) is getattr(remote, name)


def test_the_sdk_is_marked_typed_for_type_checkers() -> None:
    # PEP 561: without the marker, mypy treats `import wepush.sdk` in a user's script as untyped.
    assert importlib.resources.files("wepush.sdk").joinpath("py.typed").is_file()
