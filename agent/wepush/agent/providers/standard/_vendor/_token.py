"""Access tokens cached for one provider session (WeCom application, WeChat), and the factory side of it.

A token is fetched on first use, renewed shortly before the vendor's stated
expiry and refreshed on demand when the vendor rejects it. It never outlives the
session and is never written anywhere: it is masked in diagnostics like a secret.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar, TypeVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import ProviderResult

from ._credentials import Credentials
from ._errors import ErrorRow, ErrorTable
from ._factory import HttpVendorFactory, VendorAccountT
from ._http import OutboundRequest, VendorHttp
from ._replies import errcode_reply, judge

__all__ = ["AccessTokenCache", "TokenGrant", "TokenVendorFactory", "fetch_errcode_token"]

#: Renew this long before the vendor's expiry, so a token never expires mid-request.
_EARLY_RENEWAL = timedelta(minutes=5)
_DEFAULT_LIFETIME = timedelta(hours=2)


@dataclass(frozen=True, slots=True)
class TokenGrant:
    value: str
    lifetime: timedelta

    def __repr__(self) -> str:
        return f"TokenGrant(lifetime={self.lifetime})"


TokenFetch = Callable[[], Awaitable["TokenGrant | ProviderResult"]]


class AccessTokenCache:
    """One token shared by every send of a session.

    A lock makes concurrent senders share one fetch. ``refresh(stale)`` fetches
    again only while ``stale`` is still the cached token, so a burst of
    rejections from many concurrent sends costs one fetch, not one per send.
    """

    def __init__(
        self, fetch: TokenFetch, clock: ExecutionClock, on_token: Callable[[str], None] = lambda _t: None
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._on_token = on_token
        self._lock = asyncio.Lock()
        self._value: str | None = None
        self._renew_at = 0.0
        self.fetches = 0

    def __repr__(self) -> str:
        return f"AccessTokenCache(cached={self._value is not None}, fetches={self.fetches})"

    async def current(self) -> str | ProviderResult:
        async with self._lock:
            if self._value is not None and self._clock.monotonic() < self._renew_at:
                return self._value
            return await self._renew()

    async def refresh(self, stale: str) -> str | ProviderResult:
        """A token other than ``stale``: fetched now unless another send already did."""
        async with self._lock:
            if self._value is not None and self._value != stale:
                return self._value
            return await self._renew()

    async def _renew(self) -> str | ProviderResult:
        self._value = None
        self.fetches += 1
        grant = await self._fetch()
        if isinstance(grant, ProviderResult):
            return grant
        self._on_token(grant.value)
        margin = min(_EARLY_RENEWAL, grant.lifetime / 10)
        self._value = grant.value
        self._renew_at = self._clock.monotonic() + (grant.lifetime - margin).total_seconds()
        return grant.value

    def forget(self) -> None:
        self._value = None


async def fetch_errcode_token(
    http: VendorHttp,
    request: OutboundRequest,
    table: ErrorTable,
    *,
    vendor: str,
    mask: Callable[[str], str],
    credentials_row: ErrorRow,
    token_codes: Collection[str],
) -> TokenGrant | ProviderResult:
    """Fetch ``{"access_token": ..., "expires_in": ...}`` from a WeChat-style token endpoint.

    At the token endpoint the "invalid token" codes (e.g. WeChat's 40001) blame the
    app secret, so they are reported as ``credentials_row`` instead of a token to refresh.
    """
    answer = await http.exchange(request)
    if isinstance(answer, ProviderResult):
        return answer
    document = answer.json_object()
    if document is not None and 200 <= answer.status < 300:
        token = document.get("access_token")
        if isinstance(token, str) and token and document.get("errcode") in (None, 0):
            expires = document.get("expires_in")
            lifetime = (
                timedelta(seconds=expires)
                if isinstance(expires, int) and not isinstance(expires, bool) and expires > 0
                else _DEFAULT_LIFETIME
            )
            return TokenGrant(token, lifetime)
    reply = errcode_reply(document) if document is not None else None
    if reply is not None and reply.code in token_codes:
        return table.fail(credentials_row, f"access token request refused, {vendor} code {reply.code}")
    if reply is not None and reply.ok:
        return table.fail(table.local("RESPONSE_UNREADABLE"), "access token response carries no token")
    result = judge(answer, reply, table, vendor=vendor, mask=mask)
    return ProviderResult.failure(
        result.category or table.local("INTERNAL_ERROR").category,
        result.provider_code,
        f"access token request failed: {result.diagnostic}",
        result.retry_after,
        result.retryable,
    )


MessageT = TypeVar("MessageT")


class TokenVendorFactory(HttpVendorFactory[VendorAccountT, MessageT]):
    """Vendors whose sends carry an access token fetched with the app credentials.

    ``test_connection`` fetches a token: it proves the credentials work without sending a message.
    """

    vendor: ClassVar[str]
    #: "This access token is invalid or expired"; at the token endpoint these codes blame the app secret.
    token_codes: ClassVar[tuple[str, ...]]

    @abstractmethod
    def token_request(self, account: VendorAccountT, credentials: Credentials) -> OutboundRequest:
        """The call that fetches a token (its URL holds the app secret)."""

    async def fetch_token(
        self, account: VendorAccountT, credentials: Credentials, http: VendorHttp | None
    ) -> TokenGrant | ProviderResult:
        table = self.table
        if http is None:
            return table.fail(table.local("INTERNAL_ERROR"), "no transport for the access token request")
        return await fetch_errcode_token(
            http,
            self.token_request(account, credentials),
            table,
            vendor=self.vendor,
            mask=credentials.mask,
            credentials_row=table.local("CREDENTIALS_REJECTED"),
            token_codes=self.token_codes,
        )

    def token_cache(
        self,
        account: VendorAccountT,
        credentials: Credentials,
        http: VendorHttp | None,
        clock: ExecutionClock,
    ) -> AccessTokenCache:
        async def fetch() -> TokenGrant | ProviderResult:
            return await self.fetch_token(account, credentials, http)

        return AccessTokenCache(fetch, clock, credentials.remember)

    async def probe(
        self, account: VendorAccountT, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult:
        grant = await self.fetch_token(account, credentials, http)
        return grant if isinstance(grant, ProviderResult) else ProviderResult.ok("OK")
