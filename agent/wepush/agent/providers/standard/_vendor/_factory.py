"""Factory bases: descriptor loading, validation, and the HTTP vendors' open/test-connection flow."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import timedelta
from functools import cached_property
from typing import ClassVar, Generic, Protocol, TypeVar

from yarl import URL

from wepush.agent.engine import ExecutionClock, ExecutionPolicies, SystemClock
from wepush.agent.providers.common import ConfigError, connect_timeout_for
from wepush.agent.providers.spi import (
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderResult,
    ProviderSession,
    SecretRef,
    SecretResolver,
    ValidationResult,
    load_descriptor_from_package,
)

from ._credentials import Credentials
from ._endpoint import loopback_override, vendor_base
from ._errors import ErrorTable
from ._http import HttpSettings, VendorHttp

__all__ = ["HttpVendorFactory", "StandardFactory", "VendorAccount"]

AccountT = TypeVar("AccountT")
MessageT = TypeVar("MessageT")


class VendorAccount(Protocol):
    """What every HTTP vendor account configuration offers the shared flow."""

    @property
    def connect_timeout(self) -> timedelta: ...

    @property
    def request_timeout(self) -> timedelta: ...

    def secret_refs(self) -> Mapping[str, SecretRef | None]: ...


VendorAccountT = TypeVar("VendorAccountT", bound=VendorAccount)


class StandardFactory(ABC, Generic[AccountT, MessageT]):
    """Descriptor and schemas come from the provider's package data; validation parses fully."""

    package: ClassVar[str]

    @cached_property
    def _descriptor(self) -> ProviderDescriptor:
        return load_descriptor_from_package(self.package)

    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    @abstractmethod
    def parse_account(self, document: ConfigDocument) -> AccountT:
        """The typed account, or ConfigError naming every issue."""

    @abstractmethod
    def parse_message(self, document: ConfigDocument) -> MessageT:
        """The typed message, or ConfigError naming every issue."""

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        try:
            self.parse_account(config)
        except ConfigError as exc:
            return ValidationResult.invalid(exc.issues)
        return ValidationResult.valid()

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        try:
            self.parse_message(config)
        except ConfigError as exc:
            return ValidationResult.invalid(exc.issues)
        return ValidationResult.valid()


class HttpVendorFactory(StandardFactory[VendorAccountT, MessageT]):
    """Production endpoints are the vendor's official hosts.

    ``endpoint_override`` (loopback only) exists so tests can run a provider against
    a local vendor server. It is a constructor argument on purpose: account
    configuration can never set it, and the entry point constructs factories
    without arguments.
    """

    table: ClassVar[ErrorTable]

    def __init__(self, *, endpoint_override: str | None = None) -> None:
        self._override = loopback_override(endpoint_override)

    def __repr__(self) -> str:
        override = None if self._override is None else str(self._override)
        return f"{type(self).__name__}(endpoint_override={override!r})"

    def base_url(self, official_host: str) -> URL:
        return vendor_base(official_host, self._override)

    def check_credentials(self, account: VendorAccountT, credentials: Credentials) -> None:
        """Checks that need secret values (e.g. a webhook URL's host); raise ConfigError."""

    @abstractmethod
    def create_session(
        self,
        account: VendorAccountT,
        message: MessageT,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> ProviderSession:
        """The provider's session over an already prepared transport."""

    async def probe(
        self, account: VendorAccountT, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult | None:
        """A side-effect-free call proving the credentials work; ``None`` when the vendor has none."""
        return None

    def _settings(self, account: VendorAccountT, policies: ExecutionPolicies) -> HttpSettings:
        declared = self.descriptor().concurrency_limit
        concurrency = policies.concurrency.max
        limit = min(concurrency, declared) if declared is not None else concurrency
        connect = connect_timeout_for(account.connect_timeout, policies)
        return HttpSettings(connect, account.request_timeout, max(1, limit))

    async def open(self, context: ProviderOpenContext) -> ProviderSession:
        """Open a Run's session; a dry run renders and signs nothing remote and opens no connection."""
        account = self.parse_account(context.account_config)
        message = self.parse_message(context.message_config)
        credentials = await Credentials.resolve(context.secrets, account.secret_refs())
        http: VendorHttp | None = None
        try:
            self.check_credentials(account, credentials)
            if not context.dry_run:
                http = VendorHttp(self._settings(account, context.policies), self.table, context.clock)
            return self.create_session(account, message, credentials, http, context.clock)
        except BaseException:
            credentials.forget()
            if http is not None:
                await http.close()
            raise

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - the SPI hands the provider its own time budget
    ) -> ConnectionTestResult:
        try:
            parsed = self.parse_account(account)
        except ConfigError as exc:
            return ConnectionTestResult(False, ErrorCategory.INVALID_REQUEST, str(exc)[:300])
        credentials = await Credentials.resolve(secrets, parsed.secret_refs())
        try:
            self.check_credentials(parsed, credentials)
        except ConfigError as exc:
            credentials.forget()
            return ConnectionTestResult(False, ErrorCategory.INVALID_REQUEST, str(exc)[:300])
        budget = min(timeout, parsed.request_timeout)
        settings = HttpSettings(min(parsed.connect_timeout, budget), budget, 1)
        http = VendorHttp(settings, self.table, SystemClock())
        started = time.monotonic()
        try:
            outcome = await self.probe(parsed, credentials, http)
        finally:
            await http.close()
            credentials.forget()
        latency_ms = round((time.monotonic() - started) * 1000)
        if outcome is None:
            # Nothing wrong was found, and nothing more can be checked without sending a message: a
            # valid account must not read as a failed one.
            return ConnectionTestResult(
                True,
                None,
                "configuration and secrets are valid; this channel has no side-effect-free check, "
                "use a dry run or a preview",
                checked=False,
            )
        if outcome.success:
            return ConnectionTestResult(True, None, "credentials accepted", latency_ms)
        return ConnectionTestResult(False, outcome.category, outcome.diagnostic or "", latency_ms)
