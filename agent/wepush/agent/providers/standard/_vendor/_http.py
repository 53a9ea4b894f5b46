"""The aiohttp transport every HTTP-speaking standard provider shares.

One ``ClientSession`` per provider session (access-token fetches reuse it).
Requests never follow redirects, ignore proxy settings from the environment and
keep no cookies; responses are read up to a fixed cap. Transport failures map to
the provider's shared rows, and diagnostics name only the vendor origin because
a request URL may carry a webhook key or an access token in its query.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from yarl import URL

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.common import (
    RequestTimeouts,
    await_cancellable,
    read_capped,
    while_connecting,
)
from wepush.agent.providers.spi import CancellationToken, ProviderResult

from ._errors import ErrorTable

__all__ = [
    "MAX_RESPONSE_BYTES",
    "HttpSettings",
    "OutboundRequest",
    "VendorHttp",
    "VendorResponse",
    "origin_of",
]

#: Vendor answers are small JSON documents; anything longer is cut off here.
MAX_RESPONSE_BYTES = 64 * 1024
_KEEPALIVE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class HttpSettings:
    connect_timeout: timedelta
    request_timeout: timedelta
    connection_limit: int
    max_response_bytes: int = MAX_RESPONSE_BYTES


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """One vendor call exactly as it goes on the wire."""

    method: str
    url: URL
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None

    @classmethod
    def post_json(cls, url: URL, payload: Any) -> OutboundRequest:
        """A POST of ``payload`` as JSON; non-ASCII text goes out as UTF-8 (the declared charset)."""
        return cls(
            "POST",
            url,
            {"Content-Type": "application/json; charset=utf-8"},
            json.dumps(payload, ensure_ascii=False).encode("utf-8"),
        )

    def __repr__(self) -> str:
        # The URL may hold a webhook key or access token and the headers a signature.
        return f"OutboundRequest({self.method} {origin_of(self.url)}, body={len(self.body or b'')} bytes)"


@dataclass(frozen=True, slots=True)
class VendorResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool

    def __repr__(self) -> str:
        return (
            f"VendorResponse(status={self.status}, body={len(self.body)} bytes, truncated={self.truncated})"
        )

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object, or ``None`` when it is cut off, not JSON or not an object."""
        if self.truncated or not self.body:
            return None
        try:
            document = json.loads(self.body)
        except (ValueError, RecursionError):
            # RecursionError: a body nested deeper than the parser goes is no answer either.
            return None
        return document if isinstance(document, dict) else None


def origin_of(url: URL) -> str:
    """Scheme, host and port only: never the path or query, which may hold credentials."""
    return str(url.origin())


class VendorHttp:
    """Sends :class:`OutboundRequest` objects and classifies every transport failure."""

    def __init__(self, settings: HttpSettings, table: ErrorTable, clock: ExecutionClock) -> None:
        self._settings = settings
        self._table = table
        self._clock = clock
        limit = max(1, settings.connection_limit)
        self._timeouts = RequestTimeouts(settings.connect_timeout, settings.request_timeout)
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=limit, limit_per_host=limit, keepalive_timeout=_KEEPALIVE_SECONDS
            ),
            timeout=self._timeouts.default,
            trust_env=False,
            raise_for_status=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self.calls = 0

    def __repr__(self) -> str:
        return f"VendorHttp(closed={self._http.closed})"

    async def close(self) -> None:
        if not self._http.closed:
            await self._http.close()

    async def exchange(
        self,
        request: OutboundRequest,
        *,
        deadline: datetime | None = None,
        token: CancellationToken | None = None,
    ) -> VendorResponse | ProviderResult:
        """The vendor's answer, or a classified failure result. Never raises for transport errors."""
        table = self._table
        if token is not None and token.cancelled:
            return table.fail(table.local("CANCELLED"), "cancelled before the call")
        if token is not None:
            token.nothing_sent_yet()  # a message call (token fetches pass none): until it connects
        return await await_cancellable(
            token,
            lambda: self._call(request, deadline, token),
            lambda: table.fail(table.local("CANCELLED"), "cancelled while the call was in flight"),
        )

    async def _call(
        self, request: OutboundRequest, deadline: datetime | None, token: CancellationToken | None = None
    ) -> VendorResponse | ProviderResult:
        self.calls += 1
        try:
            async with self._http.request(
                request.method,
                request.url,
                headers=dict(request.headers),
                data=request.body,
                allow_redirects=False,
                timeout=self._timeouts.until(deadline, self._clock),
            ) as response:
                body, truncated = await read_capped(response, self._settings.max_response_bytes)
                return VendorResponse(response.status, dict(response.headers), body, truncated)
        except asyncio.CancelledError as exc:
            # Cut off by the engine's deadline (or a stop): tell it whether anything was sent.
            if token is not None and not while_connecting(exc):
                token.sending()
            raise
        except Exception as exc:
            return self.classify(exc, origin_of(request.url))

    def classify(self, exc: BaseException, origin: str) -> ProviderResult:
        """A timeout before the request had a connection sent nothing (``while_connecting``)."""
        table = self._table
        if isinstance(exc, aiohttp.ClientSSLError):
            return table.fail(table.local("TLS_FAILED"), f"TLS handshake with {origin} failed")
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return table.fail(table.local("CONNECT_TIMEOUT"), f"connecting to {origin} timed out")
        if isinstance(exc, aiohttp.ClientConnectorError):
            reason = exc.os_error.strerror or type(exc.os_error).__name__
            return table.fail(table.local("CONNECT_FAILED"), f"cannot connect to {origin}: {reason}")
        if isinstance(exc, TimeoutError):
            if while_connecting(exc):
                return table.fail(table.local("CONNECT_TIMEOUT"), f"connecting to {origin} timed out")
            return table.fail(table.local("TIMEOUT"), f"{origin} did not answer in time")
        if isinstance(
            exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError
        ):
            return table.fail(table.local("CONNECTION_LOST"), f"connection to {origin} was lost mid-request")
        if isinstance(exc, aiohttp.ClientError):
            return table.fail(
                table.local("RESPONSE_UNREADABLE"), f"{origin} answered with an invalid HTTP response"
            )
        return table.fail(table.local("INTERNAL_ERROR"), f"unexpected {type(exc).__name__} calling {origin}")
