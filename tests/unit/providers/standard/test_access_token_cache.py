"""The session-scoped access token cache, on a controllable clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from wepush.agent.engine.testing import FakeClock
from wepush.agent.providers.spi import ErrorCategory, ProviderResult
from wepush.agent.providers.standard._vendor import AccessTokenCache, TokenGrant


class Issuer:
    def __init__(self, lifetime: timedelta = timedelta(hours=2)) -> None:
        self.lifetime = lifetime
        self.count = 0
        self.fail_next = False
        self.remembered: list[str] = []

    async def fetch(self) -> TokenGrant | ProviderResult:
        await asyncio.sleep(0)
        if self.fail_next:
            self.fail_next = False
            return ProviderResult.failure(ErrorCategory.NETWORK, "X_CONNECT_FAILED", "down")
        self.count += 1
        return TokenGrant(f"token-{self.count}", self.lifetime)


async def test_the_token_is_fetched_once_and_shared() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = AccessTokenCache(issuer.fetch, clock, issuer.remembered.append)

    tokens = await asyncio.gather(*(cache.current() for _ in range(10)))

    assert set(tokens) == {"token-1"}
    assert (cache.fetches, issuer.remembered) == (1, ["token-1"])


async def test_the_token_is_renewed_shortly_before_the_vendor_expiry() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = AccessTokenCache(issuer.fetch, clock)
    assert await cache.current() == "token-1"

    await clock.advance(timedelta(hours=1, minutes=54).total_seconds())
    still = await cache.current()
    await clock.advance(timedelta(minutes=2).total_seconds())
    renewed = await cache.current()

    assert (still, renewed) == ("token-1", "token-2")


async def test_refreshing_a_stale_token_fetches_once_for_all_callers() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = AccessTokenCache(issuer.fetch, clock)
    stale = await cache.current()
    assert isinstance(stale, str)

    refreshed = await asyncio.gather(*(cache.refresh(stale) for _ in range(8)))

    assert set(refreshed) == {"token-2"}
    assert cache.fetches == 2


async def test_a_failed_fetch_is_reported_and_not_cached() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = AccessTokenCache(issuer.fetch, clock)
    issuer.fail_next = True

    failed = await cache.current()
    recovered = await cache.current()

    assert isinstance(failed, ProviderResult)
    assert failed.category is ErrorCategory.NETWORK
    assert recovered == "token-1"


async def test_forget_drops_the_token() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = AccessTokenCache(issuer.fetch, clock)
    await cache.current()

    cache.forget()

    assert await cache.current() == "token-2"
    assert "token" not in repr(cache).replace("AccessTokenCache", "")
