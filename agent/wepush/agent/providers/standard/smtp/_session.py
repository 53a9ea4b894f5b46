"""The SMTP session: SESSION_PER_WORKER, one reused SMTP connection per worker slot.

The engine gives each concurrent worker its own sub-session (``open_worker``),
so connections are never shared between concurrent sends and each one is reused
for every item its worker sends. Blocking ``smtplib`` calls run in threads.
"""

from __future__ import annotations

import asyncio

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.common import failed_preview
from wepush.agent.providers.spi import (
    CancellationToken,
    PreviewResult,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
)
from wepush.agent.providers.standard._vendor import (
    Credentials,
    RenderProblem,
    UnknownVariableError,
    preview_send_request,
)

from ._compose import Envelope, compose
from ._config import SmtpAccount, SmtpMessage
from ._connection import SmtpConnection
from ._errors import SMTP_TABLE

__all__ = ["SmtpSession"]


class SmtpSession(ProviderSession):
    def __init__(
        self,
        *,
        account: SmtpAccount,
        message: SmtpMessage,
        credentials: Credentials,
        clock: ExecutionClock,
        dry_run: bool,
        owns_credentials: bool = True,
    ) -> None:
        self._account = account
        self._message = message
        self._credentials = credentials
        self._clock = clock
        self._dry_run = dry_run
        self._owns_credentials = owns_credentials
        self._connection = None if dry_run else SmtpConnection(account, credentials)
        self._closed = False

    def __repr__(self) -> str:
        return f"SmtpSession(host={self._account.host!r}, dry_run={self._dry_run}, closed={self._closed})"

    @property
    def connections_opened(self) -> int:
        return 0 if self._connection is None else self._connection.opened

    def _compose(self, request: ProviderSendRequest) -> Envelope | ProviderResult:
        try:
            return compose(self._account, self._message, request, self._clock.now())
        except (UnknownVariableError, RenderProblem) as exc:
            return SMTP_TABLE.fail(SMTP_TABLE.recipient_row(exc), str(exc))

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        if token.cancelled:
            return SMTP_TABLE.fail("SMTP_CANCELLED", "cancelled before the message was handed over")
        envelope = self._compose(request)
        if isinstance(envelope, ProviderResult):
            return envelope
        if self._connection is None:
            return ProviderResult.ok(
                "DRY_RUN", diagnostic=f"message of {len(envelope.content)} bytes rendered, not sent"
            )
        try:
            budget = (
                None
                if request.deadline is None
                else max(0.0, (request.deadline - self._clock.now()).total_seconds())
            )
            return await asyncio.to_thread(self._connection.deliver, envelope, budget)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return SMTP_TABLE.fail(
                "SMTP_INTERNAL_ERROR", f"unexpected {type(exc).__name__} in the SMTP provider"
            )

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        """The complete message a send would hand over; the password never appears in it."""
        envelope = self._compose(preview_send_request(request))
        if isinstance(envelope, ProviderResult):
            return failed_preview(envelope.provider_code, envelope.diagnostic)
        account = self._account
        return PreviewResult(
            content_type="message/rfc822",
            rendered=self._credentials.mask(envelope.content.decode("utf-8", errors="replace")),
            details={
                "server": f"{account.host}:{account.port}",
                "security": account.security.value,
                "authenticated": account.username is not None,
                "envelopeFrom": envelope.sender,
                "envelopeTo": envelope.recipient,
            },
        )

    async def open_worker(self) -> SmtpSession:
        return SmtpSession(
            account=self._account,
            message=self._message,
            credentials=self._credentials,
            clock=self._clock,
            dry_run=self._dry_run,
            owns_credentials=False,
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._connection is not None:
                await asyncio.to_thread(self._connection.close)
        finally:
            if self._owns_credentials:
                self._credentials.forget()
