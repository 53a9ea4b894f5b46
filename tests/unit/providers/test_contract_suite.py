"""The contract suite itself: each check catches the provider defect it exists for."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.fake import FakeProviderFactory, FakeSession
from wepush.agent.providers.spi import (
    ConfigDocument,
    ErrorCategory,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderResult,
    ProviderSchemas,
    ThreadSafetyMode,
    ValidationIssue,
    ValidationResult,
)
from wepush.agent.providers.testing import CONTRACT_CHECKS, ContractSubject, ContractViolation, InvalidConfig

CHECKS = {check.name: check for check in CONTRACT_CHECKS}
ACCOUNT = ConfigDocument.from_json("fake/account", "1", {"name": "x"})
MESSAGE = ConfigDocument.from_json("fake/message", "1", {"text": "hi"})


def subject(factory: FakeProviderFactory, **overrides: Any) -> ContractSubject:
    fields: dict[str, Any] = {
        "factory": factory,
        "account": ACCOUNT,
        "message": MESSAGE,
        "secrets": MappingSecretResolver({}),
        "recipient": lambda n: RecipientRecord.of(f"item-{n}", n, {"address": f"u{n}"}),
    }
    fields.update(overrides)
    return ContractSubject(**fields)


class DescribedFactory(FakeProviderFactory):
    def __init__(self, **changes: Any) -> None:
        super().__init__()
        self._changes = changes

    def descriptor(self) -> ProviderDescriptor:
        return dataclasses.replace(super().descriptor(), **self._changes)


class ReclosingSession(FakeSession):
    async def close(self) -> None:
        if self.closed:
            raise RuntimeError("already closed")
        await super().close()


class ReclosingFactory(FakeProviderFactory):
    async def open(self, context: ProviderOpenContext) -> FakeSession:
        return ReclosingSession(self, context, None)


async def test_thread_safety_check_catches_a_thread_safe_claim_that_breaks_under_load() -> None:
    def fails_when_overlapping(_: object) -> ProviderResult:
        if factory.stats.active > 1:
            return ProviderResult.failure(ErrorCategory.INTERNAL, "RACE")
        return ProviderResult.ok()

    factory = FakeProviderFactory(
        thread_safety=ThreadSafetyMode.THREAD_SAFE, latency=0.002, outcome=fails_when_overlapping
    )

    with pytest.raises(ContractViolation, match="succeeded through the engine"):
        await CHECKS["declared_thread_safety_holds"](subject(factory))


async def test_thread_safety_check_accepts_a_serialized_provider_under_engine_concurrency() -> None:
    factory = FakeProviderFactory(thread_safety=ThreadSafetyMode.SERIALIZED, latency=0.001)

    await CHECKS["declared_thread_safety_holds"](subject(factory))

    assert factory.stats.peak == 1
    assert len(factory.calls) == 32


async def test_category_check_catches_a_claim_without_a_scenario() -> None:
    broken = subject(FakeProviderFactory(), claimed_categories=frozenset({ErrorCategory.TIMEOUT}))

    with pytest.raises(ContractViolation, match="without a scenario: \\['TIMEOUT'\\]"):
        await CHECKS["claimed_error_categories_are_reachable"](broken)


async def test_category_check_catches_a_scenario_reaching_another_category() -> None:
    async def network_instead() -> ProviderResult:
        return ProviderResult.failure(ErrorCategory.NETWORK, "NET")

    broken = subject(
        FakeProviderFactory(),
        claimed_categories=frozenset({ErrorCategory.TIMEOUT}),
        scenarios={ErrorCategory.TIMEOUT: network_instead},
    )

    with pytest.raises(ContractViolation, match="TIMEOUT scenario produced NETWORK"):
        await CHECKS["claimed_error_categories_are_reachable"](broken)


async def test_validation_check_catches_an_accepted_invalid_config() -> None:
    accepted = InvalidConfig(ConfigDocument.from_json("fake/account", "1", {"name": ""}), "/name")

    with pytest.raises(ContractViolation, match="invalid configuration was accepted"):
        await CHECKS["invalid_config_is_reported_per_field"](
            subject(FakeProviderFactory(), invalid_accounts=[accepted])
        )


class MisaddressingFactory(FakeProviderFactory):
    """Refuses accounts without a name, but blames the wrong field."""

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        if config.json().get("name"):
            return ValidationResult.valid()
        return ValidationResult.invalid([ValidationIssue("/other", "BAD", "bad")])


async def test_validation_check_catches_an_issue_that_names_the_wrong_field() -> None:
    invalid = InvalidConfig(ConfigDocument.from_json("fake/account", "1", {}), "/name")

    with pytest.raises(ContractViolation, match="expected an issue at '/name'"):
        await CHECKS["invalid_config_is_reported_per_field"](
            subject(MisaddressingFactory(), invalid_accounts=[invalid])
        )


async def test_close_check_catches_a_session_that_fails_on_second_close() -> None:
    with pytest.raises(RuntimeError, match="already closed"):
        await CHECKS["close_is_idempotent"](subject(ReclosingFactory()))


async def test_secret_check_catches_an_unmarked_credential_field() -> None:
    base = FakeProviderFactory().descriptor().schemas
    schemas = ProviderSchemas(
        account={"type": "object", "properties": {"accessToken": {"type": "string"}}},
        message=base.message,
        recipient=base.recipient,
        ui=base.ui,
    )

    with pytest.raises(ContractViolation, match="account/accessToken looks like a credential"):
        await CHECKS["secret_fields_are_marked"](subject(DescribedFactory(schemas=schemas)))


async def test_id_check_catches_a_malformed_provider_id() -> None:
    with pytest.raises(ContractViolation, match="provider id 'Fake Provider' is malformed"):
        await CHECKS["provider_id_is_unique_and_well_formed"](
            subject(DescribedFactory(provider_id="Fake Provider"))
        )
