"""The fake provider passes the same provider contract suite as real channels."""

from __future__ import annotations

import pytest

from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.fake import FakeProviderFactory
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
    open_session,
)

ACCOUNT = ConfigDocument.from_json("fake/account", "1", {"name": "contract"})
MESSAGE = ConfigDocument.from_json("fake/message", "1", {"text": "hello {address}"})


def _recipient(n: int) -> RecipientRecord:
    return RecipientRecord.of(f"item-{n}", n, {"address": f"user{n}@example.test"})


def _failing_with(category: ErrorCategory) -> Scenario:
    async def run() -> ProviderResult:
        factory = FakeProviderFactory(default=ProviderResult.failure(category, f"FAKE_{category.value}"))
        session = await open_session(_subject(factory))
        try:
            record = _recipient(1)
            request = ProviderSendRequest("run", record.item_id, 1, record, MESSAGE, "key", None)
            return await session.send(request, CancellationToken())
        finally:
            await session.close()

    return run


def _subject(factory: FakeProviderFactory) -> ContractSubject:
    return ContractSubject(
        factory=factory,
        account=ACCOUNT,
        message=MESSAGE,
        secrets=MappingSecretResolver({}),
        recipient=_recipient,
        invalid_accounts=[
            InvalidConfig(ConfigDocument.from_json("fake/account", "1", ["not", "an", "object"]), "")
        ],
        invalid_messages=[
            InvalidConfig(ConfigDocument("fake/message", "1", "application/json", b"{oops"), "")
        ],
        claimed_categories=frozenset(ErrorCategory),
        scenarios={category: _failing_with(category) for category in ErrorCategory},
    )


@pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=str)
async def test_fake_provider_honours_the_provider_contract(check: ContractCheck) -> None:
    await check(_subject(FakeProviderFactory(latency=0.001)))
