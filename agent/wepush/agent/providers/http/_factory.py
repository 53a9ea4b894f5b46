"""``HttpProviderFactory``: the entry point of the ``wepush.http`` provider."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import cached_property

from aiohttp.abc import AbstractResolver

from wepush.agent.providers.common import connect_timeout_for
from wepush.agent.providers.spi import (
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    ProviderDescriptor,
    ProviderOpenContext,
    SecretResolver,
    ValidationResult,
    load_descriptor_from_package,
)

from ._auth import AuthHeaders, CredentialUnusable
from ._config import AccountConfig, ConfigError, parse_account, parse_message
from ._errors import map_status
from ._session import HttpProviderSession
from ._transport import TransportSettings, classify_exception, open_client_session, vet_url

__all__ = ["HttpProviderFactory"]

_PACKAGE = __name__.rpartition(".")[0]


class HttpProviderFactory:
    """Creates HTTP Provider sessions.

    ``allow_loopback_for_tests`` lets sessions reach 127.0.0.0/8 and ::1 so tests
    can talk to a local vendor server. It is a constructor argument on purpose:
    account configuration can never set it, and the entry point used by the
    Service and Agent constructs the factory without arguments.
    ``resolver_factory`` replaces getaddrinfo underneath the vetting resolver
    (tests use it to make a name resolve to a chosen address); vetting still applies.
    """

    def __init__(
        self,
        *,
        allow_loopback_for_tests: bool = False,
        resolver_factory: Callable[[], AbstractResolver] | None = None,
    ) -> None:
        self._allow_loopback = allow_loopback_for_tests
        self._resolver_factory = resolver_factory

    def __repr__(self) -> str:
        return f"HttpProviderFactory(allow_loopback_for_tests={self._allow_loopback})"

    @cached_property
    def _descriptor(self) -> ProviderDescriptor:
        return load_descriptor_from_package(_PACKAGE)

    def descriptor(self) -> ProviderDescriptor:
        return self._descriptor

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        try:
            parse_account(config, self._descriptor.schemas.account, allow_loopback=self._allow_loopback)
        except ConfigError as exc:
            return ValidationResult.invalid(exc.issues)
        return ValidationResult.valid()

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        try:
            parse_message(config, self._descriptor.schemas.message)
        except ConfigError as exc:
            return ValidationResult.invalid(exc.issues)
        return ValidationResult.valid()

    def _settings(self, account: AccountConfig, connection_limit: int) -> TransportSettings:
        return TransportSettings(
            policy=account.address_policy(allow_loopback=self._allow_loopback),
            connection_limit=connection_limit,
            connect_timeout=account.connect_timeout,
            request_timeout=account.request_timeout,
            tls_verify=account.tls_verify,
            inner_resolver=self._resolver_factory,
        )

    async def open(self, context: ProviderOpenContext) -> HttpProviderSession:
        """Open a Run's session; a dry run renders requests but never opens a connection."""
        account = parse_account(
            context.account_config, self._descriptor.schemas.account, allow_loopback=self._allow_loopback
        )
        message = parse_message(context.message_config, self._descriptor.schemas.message)
        auth = await AuthHeaders.resolve(account.auth, context.secrets)
        account = replace(
            account, connect_timeout=connect_timeout_for(account.connect_timeout, context.policies)
        )
        settings = self._settings(account, context.policies.concurrency.max)
        http = None if context.dry_run else open_client_session(settings)
        return HttpProviderSession(
            account=account,
            message=message,
            auth=auth,
            policy=settings.policy,
            http=http,
            clock=context.clock,
        )

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - the SPI hands the provider its own time budget
    ) -> ConnectionTestResult:
        """HEAD the base URL under the same address policy as sending.

        Any HTTP answer except 401, 403 and 5xx proves the endpoint is reachable.
        """
        try:
            config = parse_account(
                account, self._descriptor.schemas.account, allow_loopback=self._allow_loopback
            )
        except ConfigError as exc:
            return ConnectionTestResult(False, ErrorCategory.INVALID_REQUEST, str(exc)[:300])
        budget = min(timeout, config.request_timeout)
        settings = replace(
            self._settings(config, 1),
            connect_timeout=min(config.connect_timeout, budget),
            request_timeout=budget,
        )
        try:
            auth = await AuthHeaders.resolve(config.auth, secrets)
        except CredentialUnusable as exc:
            return ConnectionTestResult(False, ErrorCategory.AUTHENTICATION, str(exc))
        origin = str(config.base_url.origin())
        started = time.monotonic()
        try:
            vet_url(config.base_url, settings.policy)
            async with open_client_session(settings) as http:
                target = config.base_url.extend_query(dict(auth.query)) if auth.query else config.base_url
                response = await http.head(target, headers=dict(auth.headers), allow_redirects=False)
                response.release()
                status = response.status
        except Exception as exc:
            failure = classify_exception(exc, "HEAD", origin)
            return ConnectionTestResult(False, failure.mapping.category, failure.diagnostic)
        finally:
            auth.forget()
        latency_ms = round((time.monotonic() - started) * 1000)
        if status in {401, 403} or status >= 500:
            return ConnectionTestResult(False, map_status(status).category, f"HTTP {status}", latency_ms)
        return ConnectionTestResult(True, None, f"HTTP {status}", latency_ms)
