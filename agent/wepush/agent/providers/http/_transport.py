"""The aiohttp plumbing shared by sending and connection tests.

One ``ClientSession`` per Provider session, on a ``TCPConnector`` whose resolver
is the :class:`VettingResolver`; every transport failure is classified here so
sending and connection tests agree on codes and categories.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import aiohttp
from aiohttp.abc import AbstractResolver
from yarl import URL

from wepush.agent.providers.common import RequestTimeouts, while_connecting

from ._address_policy import AddressPolicy, AddressRefusedError, legacy_numeric_host
from ._errors import HTTP_ERROR_TABLE, IDEMPOTENT_METHODS, ErrorMapping
from ._resolver import VettingResolver

__all__ = [
    "TransportFailure",
    "TransportSettings",
    "classify_exception",
    "open_client_session",
    "vet_url",
]

# Long enough that a steady bulk send reuses connections instead of re-handshaking.
_KEEPALIVE_SECONDS = 75.0


@dataclass(frozen=True, slots=True)
class TransportSettings:
    policy: AddressPolicy
    connection_limit: int
    connect_timeout: timedelta
    request_timeout: timedelta
    tls_verify: bool = True
    inner_resolver: Callable[[], AbstractResolver] | None = None


def open_client_session(settings: TransportSettings) -> aiohttp.ClientSession:
    """A session whose connector connects only to addresses the policy allows.

    ``trust_env=False`` keeps proxies from the environment out: a proxy would
    resolve and connect on our behalf, bypassing the vetting resolver.
    """
    inner = settings.inner_resolver() if settings.inner_resolver is not None else None
    limit = max(1, settings.connection_limit)
    ssl_option: ssl.SSLContext | bool = bool(settings.tls_verify)
    connector = aiohttp.TCPConnector(
        limit=limit,
        limit_per_host=limit,
        keepalive_timeout=_KEEPALIVE_SECONDS,
        resolver=VettingResolver(settings.policy, inner),
        ssl=ssl_option,
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=RequestTimeouts(settings.connect_timeout, settings.request_timeout).default,
        trust_env=False,
        auto_decompress=True,
        raise_for_status=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def vet_url(url: URL, policy: AddressPolicy) -> None:
    """Refuse non-HTTP schemes and literal IP hosts the policy forbids.

    Host names are vetted by the resolver at connect time; literal addresses never
    reach a resolver in aiohttp, so they are checked here.
    """
    if url.scheme not in {"http", "https"}:
        raise AddressRefusedError(url.scheme, "only http and https are allowed")
    host = url.host
    if not host:
        raise AddressRefusedError("", "no host")
    if legacy_numeric_host(host):
        raise AddressRefusedError(host, "non-canonical numeric host")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return
    policy.check(literal)


@dataclass(frozen=True, slots=True)
class TransportFailure:
    mapping: ErrorMapping
    retryable: bool
    diagnostic: str


def _failure(code: str, diagnostic: str, *, retryable: bool | None = None) -> TransportFailure:
    mapping = HTTP_ERROR_TABLE[code]
    return TransportFailure(mapping, mapping.retryable if retryable is None else retryable, diagnostic)


def classify_exception(exc: BaseException, method: str, origin: str) -> TransportFailure:
    """Map a transport exception to a stable code.

    Diagnostics name the origin (scheme, host, port) only: paths and queries may
    carry Recipient data or credentials. A timeout that ran out before the
    request had a connection sent nothing (``while_connecting``).
    """
    idempotent = method in IDEMPOTENT_METHODS
    if isinstance(exc, AddressRefusedError):
        return _failure("HTTP_ADDRESS_REFUSED", f"destination address refused: {exc.reason}")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        if isinstance(exc.os_error, AddressRefusedError):
            return _failure("HTTP_ADDRESS_REFUSED", f"destination address refused: {exc.os_error.reason}")
        return _failure("HTTP_CONNECT_FAILED", f"cannot resolve the host of {origin}")
    if isinstance(exc, aiohttp.ClientSSLError):
        return _failure("HTTP_TLS_FAILED", f"TLS handshake with {origin} failed")
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        # Nothing was sent yet, so repeating the attempt cannot duplicate a message.
        return _failure("HTTP_CONNECT_TIMEOUT", f"connecting to {origin} timed out")
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        return _failure("HTTP_CONNECT_FAILED", f"cannot connect to {origin}: {reason}")
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        if while_connecting(exc):
            return _failure("HTTP_CONNECT_TIMEOUT", f"connecting to {origin} timed out")
        return _failure("HTTP_TIMEOUT", f"{method} to {origin} timed out", retryable=idempotent)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError):
        # The connection was up (connect failures are caught above): the request may have been read
        # and acted on, so this is an UNKNOWN outcome, never a plain NETWORK failure.
        return _failure(
            "HTTP_CONNECTION_LOST", f"connection to {origin} was lost mid-request", retryable=idempotent
        )
    if isinstance(exc, aiohttp.ClientError):
        return _failure("HTTP_PROTOCOL_ERROR", f"{origin} answered with an invalid HTTP response")
    return _failure("HTTP_INTERNAL_ERROR", f"unexpected {type(exc).__name__} while calling {origin}")
