"""Access tokens cached for one provider session (WeCom application, WeChat), and the factory side of it.

A token is fetched on first use, renewed shortly before the vendor's stated
expiry and refreshed on demand when the vendor rejects it. It never outlives the
session and is never written anywhere: it is masked in diagnostics like a secret.

A fetch is shared by every send that needs a token meanwhile, so it runs in a
task the cache owns, bounded by the account's request timeout. Each send waits
for it only within its own item deadline and only until its own cancellation
token fires: one send giving up never fails the others, and a fetch nobody
waits for any more is cancelled. Running out of time while waiting is
``*_ACCESS_TOKEN_TIMEOUT``: nothing was sent, so it is a plain retryable failure,
never an unknown outcome. The same holds for the token endpoint's other answers
(:func:`fetch_errcode_token`): a connection dropped mid-request is
``*_ACCESS_TOKEN_CONNECTION_LOST`` and an answer without a readable token
``*_ACCESS_TOKEN_UNREADABLE``, never a send's "may have been delivered" row.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar, TypeVar

from wepush.agent.engine import ExecutionClock
from wepush.agent.providers.spi import CancellationToken, ErrorCategory, ProviderResult

from ._credentials import Credentials
from ._errors import ErrorRow, ErrorTable
from ._factory import HttpVendorFactory, VendorAccountT
from ._http import OutboundRequest, VendorHttp
from ._replies import errcode_reply, judge

__all__ = ["AccessTokenCache", "TokenGrant", "TokenVendorFactory", "fetch_errcode_token"]

#: Renew this long before the vendor's expiry, so a token never expires mid-request.
_EARLY_RENEWAL = timedelta(minutes=5)
_DEFAULT_LIFETIME = timedelta(hours=2)
#: A send stops waiting for a token this much before its deadline (at most a tenth of the time it has
#: left). At the deadline itself the engine cuts the call off and, unable to tell that nothing was sent,
#: records an unknown outcome; giving up a moment earlier lets the send report what really happened.
_DEADLINE_RESERVE = timedelta(milliseconds=50)


@dataclass(frozen=True, slots=True)
class TokenGrant:
    value: str
    lifetime: timedelta

    def __repr__(self) -> str:
        return f"TokenGrant(lifetime={self.lifetime})"


TokenFetch = Callable[[], Awaitable["TokenGrant | ProviderResult"]]


@dataclass(eq=False, slots=True)
class _Renewal:
    """One fetch in flight and how many sends are waiting for it."""

    task: asyncio.Task[TokenGrant | ProviderResult]
    waiters: int = 0


class AccessTokenCache:
    """One token shared by every send of a session.

    Concurrent senders share one fetch. ``refresh(stale)`` fetches again only
    while ``stale`` is still the cached token, so a burst of rejections from many
    concurrent sends costs one fetch, not one per send. ``close`` cancels and
    awaits a fetch still in flight.
    """

    def __init__(
        self,
        fetch: TokenFetch,
        clock: ExecutionClock,
        on_token: Callable[[str], None] = lambda _t: None,
        *,
        table: ErrorTable,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._on_token = on_token
        self._table = table
        # Looked up now: a table without these rows fails when the session opens, not mid-run.
        self._timeout_row = table.local("ACCESS_TOKEN_TIMEOUT")
        self._cancelled_row = table.local("CANCELLED")
        self._renewal: _Renewal | None = None
        self._tasks: set[asyncio.Task[TokenGrant | ProviderResult]] = set()
        self._value: str | None = None
        self._renew_at = 0.0
        self.fetches = 0

    def __repr__(self) -> str:
        return (
            f"AccessTokenCache(cached={self._value is not None}, fetches={self.fetches}, "
            f"in_flight={len(self._tasks)})"
        )

    @property
    def in_flight(self) -> int:
        """Fetch tasks not finished yet (including cancelled ones still unwinding)."""
        return len(self._tasks)

    async def current(
        self, *, deadline: datetime | None = None, token: CancellationToken | None = None
    ) -> str | ProviderResult:
        """The cached token, or one fetched (or being fetched) now, waited for until ``deadline``."""
        if self._value is not None and self._clock.monotonic() < self._renew_at:
            return self._value
        return await self._renewed(deadline, token)

    async def refresh(
        self, stale: str, *, deadline: datetime | None = None, token: CancellationToken | None = None
    ) -> str | ProviderResult:
        """A token other than ``stale``: fetched now unless another send already did."""
        if self._value is not None and self._value != stale:
            return self._value
        return await self._renewed(deadline, token)

    def forget(self) -> None:
        self._value = None

    async def close(self) -> None:
        """Forget the token and stop any fetch still in flight (idempotent)."""
        self._value = None
        self._renewal = None
        tasks = tuple(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _renewed(
        self, deadline: datetime | None, token: CancellationToken | None
    ) -> str | ProviderResult:
        if token is not None and token.cancelled:
            return self._cancelled("cancelled before the access token request")
        budget = None if deadline is None else self._budget(deadline)
        if budget is not None and budget <= 0:
            return self._timed_out()
        renewal = self._renewal
        if renewal is None or renewal.task.done():
            renewal = self._renewal = self._start()
        woke_for_fetch = await self._wait(renewal, budget, token)
        if token is not None and token.cancelled:
            return self._cancelled("cancelled while waiting for the access token")
        if not woke_for_fetch:
            return self._timed_out()
        if renewal.task.cancelled():
            return self._cancelled("the session closed while the access token was being fetched")
        grant = renewal.task.result()
        return grant.value if isinstance(grant, TokenGrant) else grant

    def _budget(self, deadline: datetime) -> float:
        remaining = deadline - self._clock.now()
        return (remaining - min(_DEADLINE_RESERVE, remaining / 10)).total_seconds()

    def _start(self) -> _Renewal:
        # The old token is not used while its successor is fetched (it may be the one just rejected).
        self._value = None
        task = asyncio.ensure_future(self._renew())
        self._tasks.add(task)
        task.add_done_callback(self._settled)
        return _Renewal(task)

    def _settled(self, task: asyncio.Task[TokenGrant | ProviderResult]) -> None:
        self._tasks.discard(task)
        if self._renewal is not None and self._renewal.task is task:
            self._renewal = None
        if not task.cancelled():
            # Retrieved here so an error nobody waited for is not reported as "never retrieved";
            # a waiter still gets it from ``task.result()``.
            task.exception()

    async def _renew(self) -> TokenGrant | ProviderResult:
        self.fetches += 1
        grant = await self._fetch()
        if isinstance(grant, TokenGrant):
            self._on_token(grant.value)
            margin = min(_EARLY_RENEWAL, grant.lifetime / 10)
            self._value = grant.value
            self._renew_at = self._clock.monotonic() + (grant.lifetime - margin).total_seconds()
        return grant

    async def _wait(self, renewal: _Renewal, budget: float | None, token: CancellationToken | None) -> bool:
        """Wait for ``renewal`` within ``budget`` seconds or until ``token`` fires; ``True`` when it finished.

        The fetch is never awaited directly, so cancelling this send (its task or its token) cannot
        cancel a fetch other sends are waiting for; the last waiter to leave cancels it.
        """
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(*_: object) -> None:
            if not woken.done():
                woken.set_result(None)

        renewal.task.add_done_callback(wake)
        disarm = None if budget is None else self._alarm(budget, wake)
        if token is not None:
            token.add_callback(wake)
        renewal.waiters += 1
        try:
            await woken
        finally:
            renewal.waiters -= 1
            renewal.task.remove_done_callback(wake)
            if disarm is not None:
                disarm()
            if token is not None:
                token.remove_callback(wake)
            if renewal.waiters == 0 and not renewal.task.done():
                # Nobody wants this token any more; the next send that needs one starts afresh.
                renewal.task.cancel()
                if self._renewal is renewal:
                    self._renewal = None
        return renewal.task.done()

    def _alarm(self, seconds: float, wake: Callable[[], None]) -> Callable[[], object]:
        """Call ``wake`` once ``seconds`` have passed on the session's clock; returns the disarm call.

        A timer when the clock offers ``call_at`` (as the engine's deadlines use), else a sleeping task.
        """
        call_at = getattr(self._clock, "call_at", None)
        if call_at is not None:
            timer = call_at(self._clock.monotonic() + seconds, wake)
            disarm: Callable[[], object] = timer.cancel
            return disarm
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        sleeper.add_done_callback(lambda _s: wake())
        return sleeper.cancel

    def _timed_out(self) -> ProviderResult:
        return self._table.fail(
            self._timeout_row, "no access token in time for the item deadline; nothing was sent"
        )

    def _cancelled(self, diagnostic: str) -> ProviderResult:
        return self._table.fail(self._cancelled_row, diagnostic)


async def fetch_errcode_token(
    http: VendorHttp,
    request: OutboundRequest,
    table: ErrorTable,
    *,
    vendor: str,
    mask: Callable[[str], str],
    credentials_row: ErrorRow,
    timeout_row: ErrorRow,
    connection_lost_row: ErrorRow,
    unreadable_row: ErrorRow,
    token_codes: Collection[str],
) -> TokenGrant | ProviderResult:
    """Fetch ``{"access_token": ..., "expires_in": ...}`` from a WeChat-style token endpoint.

    At the token endpoint the "invalid token" codes (e.g. WeChat's 40001) blame the
    app secret, so they are reported as ``credentials_row`` instead of a token to refresh.
    Unlike a send, a token request cannot hide a delivered message, so none of its outcomes
    uses a "may have been delivered" row: a timeout is ``timeout_row``, a connection dropped
    mid-request ``connection_lost_row`` and an UNKNOWN answer (an invalid HTTP response, or a
    2xx without a readable token) ``unreadable_row``; each says nothing was sent.
    """
    answer = await http.exchange(request)
    if isinstance(answer, ProviderResult):
        if answer.category is ErrorCategory.TIMEOUT:
            return table.fail(
                timeout_row, f"access token request timed out, nothing was sent: {answer.diagnostic}"
            )
        if answer.provider_code == table.local("CONNECTION_LOST").code:
            return table.fail(
                connection_lost_row,
                f"access token request lost its connection, nothing was sent: {answer.diagnostic}",
            )
        if answer.category is ErrorCategory.UNKNOWN:
            return table.fail(
                unreadable_row, f"access token request failed: {answer.diagnostic}; nothing was sent"
            )
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
        return table.fail(
            unreadable_row,
            f"access token request failed: HTTP {answer.status} carries no token; nothing was sent",
        )
    result = judge(answer, reply, table, vendor=vendor, mask=mask)
    if result.category is ErrorCategory.UNKNOWN:
        why = "cut off" if answer.truncated else "without a readable token"
        return table.fail(
            unreadable_row, f"access token request failed: HTTP {answer.status} {why}; nothing was sent"
        )
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
            timeout_row=table.local("ACCESS_TOKEN_TIMEOUT"),
            connection_lost_row=table.local("ACCESS_TOKEN_CONNECTION_LOST"),
            unreadable_row=table.local("ACCESS_TOKEN_UNREADABLE"),
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

        return AccessTokenCache(fetch, clock, credentials.remember, table=self.table)

    async def probe(
        self, account: VendorAccountT, credentials: Credentials, http: VendorHttp
    ) -> ProviderResult:
        grant = await self.fetch_token(account, credentials, http)
        return grant if isinstance(grant, ProviderResult) else ProviderResult.ok("OK")
