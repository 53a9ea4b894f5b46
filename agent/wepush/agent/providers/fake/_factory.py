"""A scriptable provider: outcomes per item, sequence or function; latency on the run's clock."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    PreviewResult,
    ProviderCapabilities,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    SecretRef,
    SecretResolver,
    SecretValue,
    ThreadSafetyMode,
    ValidationIssue,
    ValidationResult,
    load_descriptor_from_package,
)

__all__ = ["FakeProviderFactory", "FakeSession", "Hang", "Outcome"]


@dataclass(frozen=True, slots=True)
class Hang:
    """The call never answers by itself: it ends only through the cancellation token or an abort.

    ``sent`` is what the call tells its token first: ``False`` that it has sent nothing (still
    connecting), ``True`` that it may have (``nothing_sent_yet`` then ``sending``), ``None`` nothing.
    """

    sent: bool | None = None


Outcome = ProviderResult | Exception | Hang
OutcomeScript = Callable[[ProviderSendRequest], Outcome]


class _CallStats:
    def __init__(self) -> None:
        self.active = 0
        self.peak = 0

    def enter(self) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)

    def leave(self) -> None:
        self.active -= 1


class FakeProviderFactory:
    """Scripted outcomes are looked up by item id, then sequence, then ``outcome``, then ``default``.

    A list of outcomes is consumed per attempt (attempt 1 takes the first element; the last one repeats).
    Latency is slept on the run's ``ExecutionClock``; with ``honour_cancellation`` the call returns
    CANCELLED as soon as the token fires. Nothing is registered globally: pass the factory to the engine.
    """

    def __init__(
        self,
        *,
        by_item: Mapping[str, Outcome | Sequence[Outcome]] | None = None,
        by_sequence: Mapping[int, Outcome | Sequence[Outcome]] | None = None,
        outcome: OutcomeScript | None = None,
        default: Outcome | None = None,
        latency: float | Callable[[ProviderSendRequest], float] = 0.0,
        thread_safety: ThreadSafetyMode | None = None,
        capabilities: ProviderCapabilities | None = None,
        concurrency_limit: int | None = None,
        spi_version: str | None = None,
        honour_cancellation: bool = True,
        open_error: Exception | None = None,
        close_error: Exception | None = None,
        account_issues: Sequence[ValidationIssue] = (),
        message_issues: Sequence[ValidationIssue] = (),
        secret: SecretRef | None = None,
    ) -> None:
        base = load_descriptor_from_package(__package__ or "wepush.agent.providers.fake")
        changes: dict[str, Any] = {}
        if thread_safety is not None:
            changes["thread_safety"] = thread_safety
        if capabilities is not None:
            changes["capabilities"] = capabilities
        if concurrency_limit is not None:
            changes["concurrency_limit"] = concurrency_limit
        if spi_version is not None:
            changes["spi_version"] = spi_version
        self._descriptor = dataclasses.replace(base, **changes)
        self._by_item = dict(by_item or {})
        self._by_sequence = dict(by_sequence or {})
        self._outcome = outcome
        self._default: Outcome = default if default is not None else ProviderResult.ok()
        self._latency = latency
        self.honour_cancellation = honour_cancellation
        self._open_error = open_error
        self._close_error = close_error
        self._account_issues = tuple(account_issues)
        self._message_issues = tuple(message_issues)
        self._secret = secret
        self.calls: list[ProviderSendRequest] = []
        self.sessions: list[FakeSession] = []
        self.stats = _CallStats()

    # ------------------------------------------------------------------ SPI

    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.of([*_object_issue(config), *self._account_issues])

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.of([*_object_issue(config), *self._message_issues])

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - SPI signature
    ) -> ConnectionTestResult:
        if self._secret is not None:
            with await secrets.resolve(self._secret):
                pass
        return ConnectionTestResult(True, None, "fake provider is always reachable", 0)

    async def open(self, context: ProviderOpenContext) -> FakeSession:
        if self._open_error is not None:
            raise self._open_error
        secret = None if self._secret is None else await context.secrets.resolve(self._secret)
        session = FakeSession(self, context, secret)
        self.sessions.append(session)
        return session

    # ------------------------------------------------------------------ scripting

    def script_for(self, request: ProviderSendRequest) -> Outcome:
        scripted: Outcome | Sequence[Outcome] | None = self._by_item.get(request.item_id)
        if scripted is None:
            scripted = self._by_sequence.get(request.recipient.sequence)
        if scripted is None:
            return self._outcome(request) if self._outcome is not None else self._default
        if isinstance(scripted, ProviderResult | Exception | Hang):
            return scripted
        return scripted[min(request.attempt, len(scripted)) - 1]

    def latency_for(self, request: ProviderSendRequest) -> float:
        return self._latency(request) if callable(self._latency) else self._latency

    @property
    def close_error(self) -> Exception | None:
        return self._close_error


class FakeSession(ProviderSession):
    """Records calls and the peak number of concurrent calls on this very session."""

    def __init__(
        self,
        factory: FakeProviderFactory,
        context: ProviderOpenContext,
        secret: SecretValue | None,
        *,
        worker: bool = False,
    ) -> None:
        self._factory = factory
        self.context = context
        self.secret = secret
        self.worker = worker
        self.stats = _CallStats()
        self.workers: list[FakeSession] = []
        self.close_calls = 0
        self.closed = False

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        if self.closed:
            raise RuntimeError("send on a closed session")
        factory = self._factory
        factory.calls.append(request)
        self.stats.enter()
        factory.stats.enter()
        try:
            outcome = factory.script_for(request)
            latency = factory.latency_for(request)
            if latency > 0 and not await self._wait(self.context.clock.sleep(latency), token):
                return _cancelled()
            if isinstance(outcome, Hang):
                if outcome.sent is not None:
                    token.nothing_sent_yet()
                    if outcome.sent:
                        token.sending()
                if factory.honour_cancellation:
                    await token.wait()
                    return _cancelled()
                await asyncio.get_running_loop().create_future()
            if isinstance(outcome, Exception):
                raise outcome
            if isinstance(outcome, ProviderResult) and outcome.success and self.context.dry_run:
                return ProviderResult.ok("DRY_RUN", external_request_id=f"dry-{request.item_id}")
            assert isinstance(outcome, ProviderResult)
            return outcome
        finally:
            self.stats.leave()
            factory.stats.leave()

    async def _wait(self, sleeping: Any, token: CancellationToken) -> bool:
        """Sleep; ``False`` if the token fired first (only when the fake honours cancellation)."""
        if not self._factory.honour_cancellation:
            await sleeping
            return True
        sleep_task = asyncio.ensure_future(sleeping)
        cancel_task = asyncio.ensure_future(token.wait())
        try:
            done, _ = await asyncio.wait({sleep_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleep_task.cancel()
            cancel_task.cancel()
        return sleep_task in done and not token.cancelled

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        message = request.message_config.json()
        text = str(message.get("text", "")) if isinstance(message, dict) else ""
        fields = request.recipient.plain() if request.recipient is not None else {}
        rendered = text.format_map(_Defaulting(fields))
        return PreviewResult("text/plain", rendered, {"fields": sorted(fields)})

    async def open_worker(self) -> FakeSession:
        worker = FakeSession(self._factory, self.context, None, worker=True)
        self.workers.append(worker)
        return worker

    async def close(self) -> None:
        self.close_calls += 1
        if self.closed:
            return
        self.closed = True
        if self.secret is not None:
            self.secret.close()
        if not self.worker and self._factory.close_error is not None:
            raise self._factory.close_error


class _Defaulting(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _cancelled() -> ProviderResult:
    return ProviderResult.failure(ErrorCategory.CANCELLED, "CANCELLED", "the call was cancelled")


def _object_issue(config: ConfigDocument) -> list[ValidationIssue]:
    try:
        parsed = config.json()
    except (ValueError, json.JSONDecodeError) as exc:
        return [ValidationIssue("", "NOT_JSON", str(exc))]
    if not isinstance(parsed, dict):
        return [ValidationIssue("", "NOT_OBJECT", "the configuration must be a JSON object")]
    return []
