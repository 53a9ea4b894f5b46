"""The explicit connection test: the provider talks to its endpoint, outside any transaction.

The provider gets its own time budget through the SPI; the Service adds a short grace period on top as
a backstop against a provider that ignores it. Whatever happens, the caller gets a categorised, redacted
outcome, never an exception text that might quote a credential. While the test runs, the secret values it
resolves are registered with the Service's redactor, so neither a log line nor the outcome's message can
quote them, even where they have no recognisable shape (a webhook URL with its secret in the path).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from wepush.agent.engine import (
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    ProviderFactory,
    SecretNotFoundError,
    SecretResolver,
    redact_diagnostic,
)
from wepush.server.application.execution import RegisteredSecrets
from wepush.server.domain.secrets import SecretScrubber

__all__ = [
    "DEFAULT_TEST_TIMEOUT",
    "MAX_TEST_TIMEOUT",
    "ConnectionTestOutcome",
    "run_connection_test",
]

DEFAULT_TEST_TIMEOUT: Final = timedelta(seconds=10)
MAX_TEST_TIMEOUT: Final = timedelta(seconds=120)
_GRACE: Final = timedelta(seconds=5)
_MESSAGE_CHARS: Final = 2000
_log = logging.getLogger("wepush.server.accounts")


@dataclass(frozen=True, slots=True)
class ConnectionTestOutcome:
    ok: bool
    category: ErrorCategory | None
    message: str
    latency_ms: int
    checked: bool = True


async def run_connection_test(
    factory: ProviderFactory,
    account: ConfigDocument,
    secrets: SecretResolver,
    timeout: timedelta,  # noqa: ASYNC109 - the provider's own budget, passed through the SPI
    *,
    redactor: SecretScrubber | None = None,
) -> ConnectionTestOutcome:
    registered = RegisteredSecrets(secrets, redactor) if redactor is not None else None
    try:
        return await _test(factory, account, registered or secrets, timeout, redactor)
    finally:
        if registered is not None:
            registered.release()


async def _test(
    factory: ProviderFactory,
    account: ConfigDocument,
    secrets: SecretResolver,
    timeout: timedelta,  # noqa: ASYNC109 - the provider's own budget, passed through the SPI
    redactor: SecretScrubber | None,
) -> ConnectionTestOutcome:
    started = time.monotonic()
    try:
        async with asyncio.timeout((timeout + _GRACE).total_seconds()):
            result = await factory.test_connection(account, secrets, timeout)
    except TimeoutError:
        result = ConnectionTestResult(False, ErrorCategory.TIMEOUT, "The connection test timed out.")
    except SecretNotFoundError:
        result = ConnectionTestResult(
            False, ErrorCategory.INVALID_REQUEST, "A secret the configuration references is not configured."
        )
    except Exception as exc:
        # Only the type reaches the log: a provider's exception text may quote what it was sent.
        _log.warning(
            "connection test of provider failed with %s",
            type(exc).__name__,
            extra={"event": "CONNECTION_TEST_FAILED"},
        )
        result = ConnectionTestResult(False, ErrorCategory.INTERNAL, "The provider failed during the test.")
    measured = round((time.monotonic() - started) * 1000)
    latency = result.latency_ms if result.latency_ms is not None and result.latency_ms >= 0 else measured
    category = None if result.ok else (result.category or ErrorCategory.UNKNOWN)
    text = result.message
    if text is not None and redactor is not None:
        # The registered values first (a rule could mask part of one and leave the rest unrecognised),
        # and before they are released: the message is what the API answers with.
        text = redactor.text(text)
    message = redact_diagnostic(text, limit=_MESSAGE_CHARS) or ("OK" if result.ok else "Failed.")
    return ConnectionTestOutcome(result.ok, category, message, latency, checked=result.checked)
