"""What a provider hands the contract suite: its factory, working configs and failure scenarios."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from wepush.agent.engine import ConcurrencyPolicy, ExecutionClock, ExecutionPolicies, SystemClock
from wepush.agent.providers.spi import (
    ConfigDocument,
    ErrorCategory,
    ProviderFactory,
    ProviderOpenContext,
    ProviderSession,
    RecipientRecord,
    SecretResolver,
)

__all__ = ["ContractSubject", "ContractViolation", "InvalidConfig", "Scenario", "open_session"]

#: Produces one ProviderResult that should carry a given ErrorCategory.
Scenario = Callable[[], Awaitable[object]]


class ContractViolation(AssertionError):
    """A provider broke the Provider SPI contract."""


@dataclass(frozen=True, slots=True)
class InvalidConfig:
    """A configuration the provider must refuse with an issue whose path is ``field``."""

    document: ConfigDocument
    field: str


@dataclass(frozen=True, slots=True)
class ContractSubject:
    """Everything the suite needs to exercise one provider.

    ``account``/``message`` must be valid and ``recipient(n)`` must be sendable
    successfully with them. ``claimed_categories`` are the ErrorCategory values
    the provider says it can report; ``scenarios`` has one scenario per claimed
    category that returns a result of that category. ``clock`` is used for
    sessions opened by the suite (a FakeClock subject is driven with ``run``).
    """

    factory: ProviderFactory
    account: ConfigDocument
    message: ConfigDocument
    secrets: SecretResolver
    recipient: Callable[[int], RecipientRecord]
    invalid_accounts: Sequence[InvalidConfig] = ()
    invalid_messages: Sequence[InvalidConfig] = ()
    claimed_categories: frozenset[ErrorCategory] = frozenset()
    scenarios: Mapping[ErrorCategory, Scenario] = field(default_factory=lambda: MappingProxyType({}))
    clock: ExecutionClock = field(default_factory=SystemClock)
    concurrent_sends: int = 16


async def open_session(
    subject: ContractSubject,
    *,
    dry_run: bool = False,
    concurrency: int = 8,
    account: ConfigDocument | None = None,
    message: ConfigDocument | None = None,
) -> ProviderSession:
    """Open a session the way the engine would, for checks that talk to the session directly."""
    context = ProviderOpenContext(
        run_id="contract-run",
        account_config=account if account is not None else subject.account,
        message_config=message if message is not None else subject.message,
        secrets=subject.secrets,
        policies=ExecutionPolicies(
            concurrency=ConcurrencyPolicy(min=1, max=max(1, concurrency), target=max(1, concurrency))
        ),
        dry_run=dry_run,
        clock=subject.clock,
    )
    return await subject.factory.open(context)
