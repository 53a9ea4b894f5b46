"""``SmtpProviderFactory``: the entry point of ``wepush.smtp``."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta
from typing import ClassVar

from wepush.agent.providers.common import connect_timeout_for
from wepush.agent.providers.spi import (
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    ProviderOpenContext,
    SecretResolver,
)
from wepush.agent.providers.standard._vendor import ConfigError, Credentials, StandardFactory

from ._config import SmtpAccount, SmtpMessage, parse_account, parse_message
from ._connection import SmtpConnection
from ._session import SmtpSession

__all__ = ["SmtpProviderFactory"]


class SmtpProviderFactory(StandardFactory[SmtpAccount, SmtpMessage]):
    """E-mail through the SMTP server named by the account (any host: it is the user's own relay)."""

    package: ClassVar[str] = __name__.rpartition(".")[0]

    def __repr__(self) -> str:
        return "SmtpProviderFactory()"

    def parse_account(self, document: ConfigDocument) -> SmtpAccount:
        return parse_account(document, self.descriptor().schemas.account)

    def parse_message(self, document: ConfigDocument) -> SmtpMessage:
        return parse_message(document, self.descriptor().schemas.message)

    async def open(self, context: ProviderOpenContext) -> SmtpSession:
        """A dry run renders messages but never connects."""
        account = self.parse_account(context.account_config)
        account = dataclasses.replace(
            account, connect_timeout=connect_timeout_for(account.connect_timeout, context.policies)
        )
        message = self.parse_message(context.message_config)
        credentials = await Credentials.resolve(context.secrets, account.secret_refs())
        return SmtpSession(
            account=account,
            message=message,
            credentials=credentials,
            clock=context.clock,
            dry_run=context.dry_run,
        )

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - the SPI hands the provider its own time budget
    ) -> ConnectionTestResult:
        """Connect, negotiate TLS and authenticate, then QUIT: no message is sent."""
        try:
            parsed = self.parse_account(account)
        except ConfigError as exc:
            return ConnectionTestResult(False, ErrorCategory.INVALID_REQUEST, str(exc)[:300])
        budget = min(timeout, parsed.request_timeout)
        parsed = dataclasses.replace(
            parsed, connect_timeout=min(parsed.connect_timeout, budget), request_timeout=budget
        )
        credentials = await Credentials.resolve(secrets, parsed.secret_refs())
        started = time.monotonic()
        try:
            result = await asyncio.to_thread(SmtpConnection(parsed, credentials).verify)
        finally:
            credentials.forget()
        latency_ms = round((time.monotonic() - started) * 1000)
        if result.success:
            return ConnectionTestResult(True, None, "connected and authenticated", latency_ms)
        return ConnectionTestResult(False, result.category, result.diagnostic or "", latency_ms)
