"""Shared set-up for HTTP Provider protocol tests against a real loopback server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from wepush.agent.engine import (
    ConcurrencyPolicy,
    ExecutionPolicies,
    MappingSecretResolver,
    RecipientRecord,
    SystemClock,
    TimeoutPolicy,
)
from wepush.agent.providers.http import HttpProviderFactory, HttpProviderSession
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ProviderOpenContext,
    ProviderResult,
    ProviderSendRequest,
    SecretRef,
)

TOKEN = "tok-9f8e7d6c5b4a-secret"
TOKEN_REF = SecretRef("default", "http-account-token")
# A query credential holds characters a URL encodes, so an echo of the request URL shows it encoded.
QUERY_KEY = "qk/7+Zx=secret"
SECRETS = MappingSecretResolver(
    {
        TOKEN_REF: TOKEN,
        SecretRef("default", "basic-pw"): "pw-Zx81-secret",
        SecretRef("default", "query-key"): QUERY_KEY,
    }
)

LOOPBACK_FACTORY = HttpProviderFactory(allow_loopback_for_tests=True)


def account_doc(base_url: str, **overrides: Any) -> ConfigDocument:
    body: dict[str, Any] = {
        "baseUrl": base_url,
        "auth": {"type": "BEARER", "token": {"$secret": "http-account-token"}},
        "connectTimeout": "PT2S",
        "requestTimeout": "PT5S",
    }
    body.update(overrides)
    return ConfigDocument.from_json("wepush.http/account", "1", body)


def message_doc(**overrides: Any) -> ConfigDocument:
    body: dict[str, Any] = {
        "method": "POST",
        "path": "/notify",
        "headers": {"Content-Type": "application/json"},
        "bodyTemplate": '{"mobile":"{{mobile}}","content":"{{content}}"}',
    }
    body.update(overrides)
    return ConfigDocument.from_json("wepush.http/message", "1", body)


def recipient(item: int = 1, **fields: Any) -> RecipientRecord:
    values = {"mobile": "13800000000", "content": "hello"}
    values.update(fields)
    return RecipientRecord.of(f"item-{item}", item, values)


def _policies(concurrency: int, timeouts: TimeoutPolicy | None) -> ExecutionPolicies:
    policies = ExecutionPolicies(concurrency=ConcurrencyPolicy(min=1, max=concurrency, target=concurrency))
    return policies if timeouts is None else replace(policies, timeout=timeouts)


@asynccontextmanager
async def http_session(
    account: ConfigDocument,
    message: ConfigDocument | None = None,
    *,
    factory: HttpProviderFactory = LOOPBACK_FACTORY,
    dry_run: bool = False,
    concurrency: int = 8,
    timeouts: TimeoutPolicy | None = None,
) -> AsyncIterator[HttpProviderSession]:
    context = ProviderOpenContext(
        run_id="run-1",
        account_config=account,
        message_config=message if message is not None else message_doc(),
        secrets=SECRETS,
        policies=_policies(concurrency, timeouts),
        dry_run=dry_run,
        clock=SystemClock(),
    )
    session = await factory.open(context)
    try:
        yield session
    finally:
        await session.close()


async def send(
    session: HttpProviderSession,
    record: RecipientRecord | None = None,
    token: CancellationToken | None = None,
    message: ConfigDocument | None = None,
) -> ProviderResult:
    record = record if record is not None else recipient()
    request = ProviderSendRequest(
        run_id="run-1",
        item_id=record.item_id,
        attempt=1,
        recipient=record,
        message_config=message if message is not None else message_doc(),
        idempotency_key=f"run-1:{record.item_id}",
        deadline=None,
    )
    return await session.send(request, token if token is not None else CancellationToken())


class PinnedResolver(AbstractResolver):
    """Resolves chosen names to chosen addresses (a DNS answer the test controls)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self._answers = answers

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self._answers[host]
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


def unused_loopback_port() -> int:
    """A port nothing listens on (bound, read, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
