"""The HTTP Provider passes the shared provider contract suite."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from wepush.agent.engine import RecipientRecord
from wepush.agent.providers.http import HTTP_ERROR_TABLE, HttpProviderFactory
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ErrorCategory,
    ProviderResult,
    ProviderSendRequest,
)
from wepush.agent.providers.testing import (
    CONTRACT_CHECKS,
    ContractCheck,
    ContractSubject,
    InvalidConfig,
    Scenario,
    ScriptedResponse,
    VendorServer,
    open_session,
)

from ._http_support import (
    LOOPBACK_FACTORY,
    SECRETS,
    account_doc,
    message_doc,
    recipient,
    unused_loopback_port,
)

C = ErrorCategory


class ExplodingResolver(AbstractResolver):
    """A resolver with a bug: the provider must still answer with a classified result."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        raise RuntimeError("resolver bug")

    async def close(self) -> None:
        return None


def _scenario(
    vendor: VendorServer,
    *,
    answer: ScriptedResponse | None = None,
    account: ConfigDocument | None = None,
    message: ConfigDocument | None = None,
    record: RecipientRecord | None = None,
    factory: HttpProviderFactory = LOOPBACK_FACTORY,
    cancelled: bool = False,
) -> Scenario:
    async def run() -> ProviderResult:
        if answer is not None:
            vendor.enqueue("*", answer)
        subject_account = account if account is not None else account_doc(vendor.base_url)
        subject_message = message if message is not None else message_doc()
        item = record if record is not None else recipient()
        token = CancellationToken()
        if cancelled:
            token.cancel("contract")
        context_subject = _subject(vendor, factory=factory, account=subject_account, message=subject_message)
        session = await open_session(context_subject)
        try:
            request = ProviderSendRequest("run", item.item_id, 1, item, subject_message, "key", None)
            return await session.send(request, token)
        finally:
            await session.close()

    return run


def _subject(vendor: VendorServer, **overrides: Any) -> ContractSubject:
    fields: dict[str, Any] = {
        "factory": LOOPBACK_FACTORY,
        "account": account_doc(vendor.base_url),
        "message": message_doc(),
        "secrets": SECRETS,
        "recipient": lambda n: recipient(n, content=f"message {n}"),
    }
    fields.update(overrides)
    return ContractSubject(**fields)


def http_contract_subject(vendor: VendorServer) -> ContractSubject:
    doc = ConfigDocument.from_json
    scenarios: dict[ErrorCategory, Scenario] = {
        C.AUTHENTICATION: _scenario(vendor, answer=ScriptedResponse(401)),
        C.AUTHORIZATION: _scenario(vendor, answer=ScriptedResponse(403)),
        C.INVALID_REQUEST: _scenario(vendor, answer=ScriptedResponse(400)),
        C.RECIPIENT_INVALID: _scenario(vendor, record=RecipientRecord.of("r", 1, {"mobile": "1"})),
        C.RATE_LIMITED: _scenario(vendor, answer=ScriptedResponse(429, headers={"Retry-After": "3"})),
        C.TEMPORARY_REMOTE: _scenario(vendor, answer=ScriptedResponse(503)),
        C.PERMANENT_REMOTE: _scenario(vendor, answer=ScriptedResponse(404)),
        C.NETWORK: _scenario(vendor, account=account_doc(f"http://127.0.0.1:{unused_loopback_port()}")),
        C.TIMEOUT: _scenario(
            vendor,
            answer=ScriptedResponse(200, delay_seconds=10),
            account=account_doc(vendor.base_url, requestTimeout="PT0.2S"),
        ),
        C.CANCELLED: _scenario(vendor, cancelled=True),
        C.INTERNAL: _scenario(
            vendor,
            account=account_doc("http://api.vendor.example"),
            factory=HttpProviderFactory(resolver_factory=ExplodingResolver),
        ),
        C.UNKNOWN: _scenario(
            vendor,
            answer=ScriptedResponse(200, body=b"<html>not json</html>"),
            message=message_doc(successCondition={"jsonPath": "$.ok", "equals": True}),
        ),
    }
    return _subject(
        vendor,
        invalid_accounts=[
            InvalidConfig(doc("a", "1", {"baseUrl": "gopher://x"}), "/baseUrl"),
            InvalidConfig(doc("a", "1", {"baseUrl": "http://10.0.0.1"}), "/baseUrl"),
            InvalidConfig(
                doc("a", "1", {"baseUrl": vendor.base_url, "auth": {"type": "BEARER"}}), "/auth/token"
            ),
        ],
        invalid_messages=[
            InvalidConfig(doc("m", "1", {"method": "CONNECT"}), "/method"),
            InvalidConfig(doc("m", "1", {"bodyTemplate": "{{a.b}}"}), "/bodyTemplate"),
        ],
        claimed_categories=frozenset(row.category for row in HTTP_ERROR_TABLE.values()),
        scenarios=scenarios,
    )


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        yield server


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=str)
async def test_http_provider_honours_the_provider_contract(
    check: ContractCheck, vendor: VendorServer
) -> None:
    await check(http_contract_subject(vendor))


def test_http_provider_claims_every_error_category() -> None:
    assert {row.category for row in HTTP_ERROR_TABLE.values()} == set(ErrorCategory)
