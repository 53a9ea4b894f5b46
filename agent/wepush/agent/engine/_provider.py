"""The Provider SPI types. They live beside the engine because the engine constructs them and must not
import the ``providers`` package; ``wepush.agent.providers.spi`` re-exports them as the public SPI."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Protocol

from ._config import ConfigDocument
from ._enums import ErrorCategory
from ._policies import ExecutionPolicies
from ._ports import ExecutionClock
from ._recipients import RecipientRecord
from ._results import ProviderResult
from ._secrets import SecretResolver

__all__ = [
    "SPI_VERSION",
    "CancellationToken",
    "ConnectionTestResult",
    "PreviewNotSupported",
    "PreviewResult",
    "ProviderCapabilities",
    "ProviderDescriptor",
    "ProviderFactory",
    "ProviderOpenContext",
    "ProviderPreviewRequest",
    "ProviderSchemas",
    "ProviderSendRequest",
    "ProviderSession",
    "ThreadSafetyMode",
    "ValidationIssue",
    "ValidationResult",
    "WorkerSessionsNotSupported",
]

SPI_VERSION = "1"
"""Major SPI version. A provider whose descriptor names another major version is refused."""


class ThreadSafetyMode(enum.StrEnum):
    """How the engine may call one session concurrently (the default is SERIALIZED)."""

    THREAD_SAFE = "THREAD_SAFE"
    SERIALIZED = "SERIALIZED"
    SESSION_PER_WORKER = "SESSION_PER_WORKER"


@dataclass(frozen=True, slots=True)
class ProviderCapabilities:
    preview: bool = False
    dry_run: bool = False
    idempotency: bool = False
    response_body: bool = False
    cancellation: bool = False
    test_connection: bool = False
    # A timed-out call may be repeated without risking a duplicate message (e.g. idempotency keys honoured).
    safe_to_retry_on_timeout: bool = False


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return value if isinstance(value, MappingProxyType) else MappingProxyType(dict(value))


@dataclass(frozen=True, slots=True)
class ProviderSchemas:
    """JSON Schemas (as parsed dicts) for the account and message configs, recipient fields and UI hints."""

    account: Mapping[str, Any] = field(default_factory=dict)
    message: Mapping[str, Any] = field(default_factory=dict)
    recipient: Mapping[str, Any] = field(default_factory=dict)
    ui: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("account", "message", "recipient", "ui"):
            object.__setattr__(self, name, _frozen_mapping(getattr(self, name)))


@dataclass(frozen=True, slots=True)
class ProviderDescriptor:
    """Static, shareable description of a provider; read-only and safe to share across runs."""

    provider_id: str
    display_name: str
    version: str
    spi_version: str = SPI_VERSION
    category: str = "other"
    description: str = ""
    icon: str | None = None
    capabilities: ProviderCapabilities = field(default_factory=ProviderCapabilities)
    concurrency_limit: int | None = None
    default_timeout: timedelta | None = None
    thread_safety: ThreadSafetyMode = ThreadSafetyMode.SERIALIZED
    platforms: tuple[str, ...] = ("any",)
    schema_versions: tuple[str, ...] = ("1",)
    schemas: ProviderSchemas = field(default_factory=ProviderSchemas)

    @property
    def spi_major(self) -> str:
        return self.spi_version.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class ValidationIssue:
    """One problem in a configuration, addressed by a JSON pointer-like ``path`` (e.g. ``/url``)."""

    path: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class ValidationResult:
    ok: bool
    issues: tuple[ValidationIssue, ...] = ()

    @classmethod
    def valid(cls) -> ValidationResult:
        return cls(True, ())

    @classmethod
    def invalid(cls, issues: Sequence[ValidationIssue]) -> ValidationResult:
        return cls(False, tuple(issues))

    @classmethod
    def of(cls, issues: Sequence[ValidationIssue]) -> ValidationResult:
        return cls(not issues, tuple(issues))


@dataclass(frozen=True, slots=True)
class ConnectionTestResult:
    ok: bool
    category: ErrorCategory | None = None
    message: str = ""
    latency_ms: int | None = None
    checked: bool = True
    """False when the channel has no side-effect-free call to make: ``ok`` then only says that the
    configuration and secrets are valid, nothing was sent to the vendor."""


#: What a provider said of its call's progress (``CancellationToken.nothing_sent_yet``/``sending``).
_PROGRESS_UNTOLD, _PROGRESS_UNSENT, _PROGRESS_SENDING = 0, 1, 2


class CancellationToken:
    """Tells a provider call to give up. Cancellation is cooperative and one-way.

    A provider may also tell how far its call got, so that a deadline which cuts the call off can say
    whether anything was sent: ``nothing_sent_yet()`` as the call starts, ``sending()`` from the moment
    anything may reach the vendor (a connection is open, a byte is about to be written). A call cut off
    while it still had sent nothing ends FAILED, not UNKNOWN; a provider that tells nothing is taken to
    have maybe sent. Both are called from the event loop's thread, like the deadline itself.
    """

    __slots__ = ("_callbacks", "_cancelled", "_event", "_progress", "_reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._reason: str | None = None
        # Created on the first add_callback: most tokens are never subscribed to, let alone cancelled.
        self._callbacks: list[Callable[[], None]] | None = None
        self._event: asyncio.Event | None = None
        self._progress = _PROGRESS_UNTOLD

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def reason(self) -> str | None:
        return self._reason

    def nothing_sent_yet(self) -> None:
        """The call has sent nothing so far. Has no effect once ``sending()`` was said: it is for the start
        of a call, and a call that may have sent once stays so."""
        if self._progress == _PROGRESS_UNTOLD:
            self._progress = _PROGRESS_UNSENT

    def sending(self) -> None:
        """From now on the call may reach the vendor."""
        self._progress = _PROGRESS_SENDING

    @property
    def nothing_sent(self) -> bool:
        """Whether the provider said the call has sent nothing (and has not said it is sending since)."""
        return self._progress == _PROGRESS_UNSENT

    def cancel(self, reason: str | None = None) -> None:
        """Signal cancellation; later calls are no-ops. Callback errors never reach the canceller."""
        if self._cancelled:
            return
        self._cancelled = True
        self._reason = reason
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            try:
                callback()
            except Exception:  # noqa: S112 - one provider callback must not stop the others
                continue

    async def wait(self) -> None:
        """Return once cancelled."""
        if self._cancelled:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on cancellation (immediately if already cancelled)."""
        if self._cancelled:
            callback()
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def remove_callback(self, callback: Callable[[], None]) -> None:
        if self._callbacks is not None and callback in self._callbacks:
            self._callbacks.remove(callback)

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"


@dataclass(frozen=True, slots=True)
class ProviderOpenContext:
    """Everything a provider needs to open a run-level session. Providers never query the Service."""

    run_id: str
    account_config: ConfigDocument
    message_config: ConfigDocument
    secrets: SecretResolver
    policies: ExecutionPolicies
    dry_run: bool
    clock: ExecutionClock
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProviderSendRequest:
    """One attempt for one item. ``idempotency_key`` is stable across attempts of the same item."""

    run_id: str
    item_id: str
    attempt: int
    recipient: RecipientRecord
    message_config: ConfigDocument
    idempotency_key: str
    deadline: datetime | None


@dataclass(frozen=True, slots=True)
class ProviderPreviewRequest:
    message_config: ConfigDocument
    recipient: RecipientRecord | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class PreviewResult:
    content_type: str
    rendered: str
    details: Mapping[str, Any] = field(default_factory=dict)


class PreviewNotSupported(Exception):
    """The provider cannot render a preview."""


class WorkerSessionsNotSupported(Exception):
    """The session cannot create per-worker sub-sessions."""


class ProviderSession(Protocol):
    """A run-level connection to a channel.

    Subclass it to inherit the defaults for ``preview`` and ``open_worker``. ``send`` must not raise for
    expected failures: it returns a classified ``ProviderResult`` (an exception is recorded as an
    INTERNAL error with an UNKNOWN outcome). ``close`` must be idempotent. How the engine may call ``send``
    concurrently is governed by ``ProviderDescriptor.thread_safety``.
    """

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult: ...

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        raise PreviewNotSupported("preview is not supported by this provider")

    async def open_worker(self) -> ProviderSession:
        """A sub-session for one worker slot; required only for SESSION_PER_WORKER providers."""
        raise WorkerSessionsNotSupported("this provider has no per-worker sessions")

    async def close(self) -> None: ...


class ProviderFactory(Protocol):
    """Entry point of a provider: describes it, validates configs and opens sessions."""

    def descriptor(self) -> ProviderDescriptor: ...

    def validate_account(self, config: ConfigDocument) -> ValidationResult: ...

    def validate_message(self, config: ConfigDocument) -> ValidationResult: ...

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - the SPI hands the provider its own time budget
    ) -> ConnectionTestResult: ...

    async def open(self, context: ProviderOpenContext) -> ProviderSession: ...
