"""The Provider contract suite: checks every ProviderFactory must pass.

Each check is an async function of a :class:`ContractSubject` that raises
:class:`ContractViolation` on failure, so any test runner can drive them; with
pytest, parametrize one test over :data:`CONTRACT_CHECKS`::

    @pytest.mark.parametrize("check", CONTRACT_CHECKS, ids=str)
    async def test_my_provider_honours_the_contract(check, subject):
        await check(subject)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from wepush.agent.providers.catalog import (
    PROVIDER_ID_PATTERN,
    ProviderCatalog,
    ProviderStatus,
    descriptor_problems,
    secret_field_problems,
)
from wepush.agent.providers.spi import (
    CancellationToken,
    ErrorCategory,
    PreviewResult,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    RecipientRecord,
    ThreadSafetyMode,
    ValidationResult,
)

from ._observe import run_through_engine
from ._subject import ContractSubject, ContractViolation, open_session

__all__ = ["CONTRACT_CHECKS", "ContractCheck"]


@dataclass(frozen=True, slots=True)
class ContractCheck:
    name: str
    run: Callable[[ContractSubject], Awaitable[None]]

    async def __call__(self, subject: ContractSubject) -> None:
        await self.run(subject)

    def __str__(self) -> str:
        return self.name


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolation(message)


def _request(record: RecipientRecord, subject: ContractSubject) -> ProviderSendRequest:
    return ProviderSendRequest(
        run_id="contract-run",
        item_id=record.item_id,
        attempt=1,
        recipient=record,
        message_config=subject.message,
        idempotency_key=f"contract-run:{record.item_id}",
        deadline=None,
    )


async def _send(session: ProviderSession, subject: ContractSubject, n: int) -> ProviderResult:
    return await session.send(_request(subject.recipient(n), subject), CancellationToken())


async def descriptor_and_schemas_load(subject: ContractSubject) -> None:
    descriptor = subject.factory.descriptor()
    problems = descriptor_problems(descriptor)
    _require(not problems, f"descriptor problems: {problems}")
    _require(subject.factory.descriptor() == descriptor, "descriptor() must be stable between calls")
    health = ProviderCatalog.from_factories([subject.factory]).health()
    _require(
        health.providers[0].status is ProviderStatus.ACTIVE,
        f"catalog refused the provider: {health.providers}",
    )


async def provider_id_is_unique_and_well_formed(subject: ContractSubject) -> None:
    provider_id = subject.factory.descriptor().provider_id
    _require(bool(PROVIDER_ID_PATTERN.match(provider_id)), f"provider id {provider_id!r} is malformed")
    installed = ProviderCatalog.from_entry_points().get(provider_id)
    _require(
        installed is None or type(installed) is type(subject.factory),
        f"provider id {provider_id!r} is already taken by {type(installed).__name__}",
    )
    catalog = ProviderCatalog.from_factories([subject.factory, subject.factory])
    second = catalog.health().providers[1]
    _require(
        second.status is ProviderStatus.REJECTED and "duplicate" in " ".join(second.reasons),
        "a second provider with the same id must be rejected",
    )


async def secret_fields_are_marked(subject: ContractSubject) -> None:
    schemas = subject.factory.descriptor().schemas
    problems = [
        problem
        for name in ("account", "message", "recipient")
        for problem in secret_field_problems(getattr(schemas, name), name)
    ]
    _require(not problems, f"secret field problems: {problems}")


def _check_structured(result: ValidationResult, field: str, what: str) -> None:
    _require(not result.ok, f"{what}: an invalid configuration was accepted")
    _require(bool(result.issues), f"{what}: a refusal must list its issues")
    for issue in result.issues:
        _require(bool(issue.code) and bool(issue.message), f"{what}: issue without code or message: {issue}")
    paths = [issue.path for issue in result.issues]
    _require(field in paths, f"{what}: expected an issue at {field!r}, got {paths}")


async def invalid_config_is_reported_per_field(subject: ContractSubject) -> None:
    factory = subject.factory
    _require(factory.validate_account(subject.account).ok, "the subject's valid account was refused")
    _require(factory.validate_message(subject.message).ok, "the subject's valid message was refused")
    _require(bool(subject.invalid_accounts) or bool(subject.invalid_messages), "no invalid configs supplied")
    for index, invalid in enumerate(subject.invalid_accounts):
        _check_structured(
            factory.validate_account(invalid.document), invalid.field, f"invalid account #{index}"
        )
    for index, invalid in enumerate(subject.invalid_messages):
        _check_structured(
            factory.validate_message(invalid.document), invalid.field, f"invalid message #{index}"
        )


async def declared_thread_safety_holds(subject: ContractSubject) -> None:
    mode = subject.factory.descriptor().thread_safety
    items, concurrency = subject.concurrent_sends * 2, 8
    observation = await run_through_engine(subject, items, concurrency)
    succeeded = observation.summary.succeeded
    _require(
        succeeded == items, f"{succeeded}/{items} items succeeded through the engine: {observation.summary}"
    )
    if mode is ThreadSafetyMode.THREAD_SAFE:
        session = await open_session(subject, concurrency=subject.concurrent_sends)
        try:
            results = await asyncio.gather(
                *(_send(session, subject, n) for n in range(subject.concurrent_sends))
            )
        finally:
            await session.close()
        failed = [r for r in results if not r.success]
        _require(not failed, f"concurrent sends on one THREAD_SAFE session failed: {failed[:3]}")
    else:
        # SERIALIZED sessions and each SESSION_PER_WORKER sub-session must see one call at a time.
        busiest = max(observation.peak_per_session, default=0)
        _require(busiest <= 1, f"a {mode.value} session saw {busiest} concurrent calls")


async def claimed_error_categories_are_reachable(subject: ContractSubject) -> None:
    claimed = subject.claimed_categories
    _require(bool(claimed), "the provider claims no error categories")
    unscripted = sorted(c.value for c in claimed - set(subject.scenarios))
    _require(not unscripted, f"claimed categories without a scenario: {unscripted}")
    unclaimed = sorted(c.value for c in set(subject.scenarios) - claimed)
    _require(not unclaimed, f"scenarios for categories the provider does not claim: {unclaimed}")
    for category in sorted(claimed, key=lambda c: c.value):
        result = await subject.scenarios[category]()
        _require(
            isinstance(result, ProviderResult), f"{category.value} scenario returned {type(result).__name__}"
        )
        assert isinstance(result, ProviderResult)
        _require(
            not result.success and result.category is category,
            f"{category.value} scenario produced {result.category} ({result.provider_code})",
        )
        _require(bool(result.provider_code), f"{category.value} result has no stable provider code")
        _require(
            category is not ErrorCategory.CANCELLED or not result.retryable,
            "a cancelled call is never retryable",
        )


async def close_is_idempotent(subject: ContractSubject) -> None:
    capabilities = subject.factory.descriptor().capabilities
    for dry_run in (False, True) if capabilities.dry_run else (False,):
        session = await open_session(subject, dry_run=dry_run)
        try:
            result = await _send(session, subject, 1)
            _require(result.success, f"sending the subject's recipient failed (dry_run={dry_run}): {result}")
            if capabilities.preview:
                preview = await session.preview(ProviderPreviewRequest(subject.message, subject.recipient(1)))
                _require(isinstance(preview, PreviewResult), "preview must return a PreviewResult")
        finally:
            await session.close()
        await session.close()


CONTRACT_CHECKS: tuple[ContractCheck, ...] = tuple(
    ContractCheck(fn.__name__, fn)
    for fn in (
        descriptor_and_schemas_load,
        provider_id_is_unique_and_well_formed,
        secret_fields_are_marked,
        invalid_config_is_reported_per_field,
        declared_thread_safety_holds,
        claimed_error_categories_are_reachable,
        close_is_idempotent,
    )
)
