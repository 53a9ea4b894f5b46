"""The session-scoped access token cache, on a controllable clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from wepush.agent.engine.testing import FakeClock
from wepush.agent.providers.spi import CancellationToken, ErrorCategory, ProviderResult
from wepush.agent.providers.standard._vendor import (
    AccessTokenCache,
    ErrorTable,
    TokenGrant,
    row,
    transport_rows,
)

C = ErrorCategory
TABLE = ErrorTable(
    "X", (*transport_rows("X"), row("X_ACCESS_TOKEN_TIMEOUT", C.TEMPORARY_REMOTE, "no token in time"))
)


class Issuer:
    """A token endpoint: answers at once, or holds every fetch until ``release`` is set."""

    def __init__(self, lifetime: timedelta = timedelta(hours=2), *, held: bool = False) -> None:
        self.lifetime = lifetime
        self.count = 0
        self.fail_next = False
        self.remembered: list[str] = []
        self.release = asyncio.Event()
        if not held:
            self.release.set()
        self.started = 0
        self.cancelled = 0

    async def fetch(self) -> TokenGrant | ProviderResult:
        self.started += 1
        try:
            await asyncio.sleep(0)
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail_next:
            self.fail_next = False
            return ProviderResult.failure(ErrorCategory.NETWORK, "X_CONNECT_FAILED", "down")
        self.count += 1
        return TokenGrant(f"token-{self.count}", self.lifetime)


def cache_for(issuer: Issuer, clock: FakeClock) -> AccessTokenCache:
    return AccessTokenCache(issuer.fetch, clock, issuer.remembered.append, table=TABLE)


async def test_the_token_is_fetched_once_and_shared() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)

    tokens = await asyncio.gather(*(cache.current() for _ in range(10)))

    assert set(tokens) == {"token-1"}
    assert (cache.fetches, issuer.remembered) == (1, ["token-1"])


async def test_the_token_is_renewed_shortly_before_the_vendor_expiry() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)
    assert await cache.current() == "token-1"

    await clock.advance(timedelta(hours=1, minutes=54).total_seconds())
    still = await cache.current()
    await clock.advance(timedelta(minutes=2).total_seconds())
    renewed = await cache.current()

    assert (still, renewed) == ("token-1", "token-2")


async def test_refreshing_a_stale_token_fetches_once_for_all_callers() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)
    stale = await cache.current()
    assert isinstance(stale, str)

    refreshed = await asyncio.gather(*(cache.refresh(stale) for _ in range(8)))

    assert set(refreshed) == {"token-2"}
    assert cache.fetches == 2


async def test_a_failed_fetch_is_reported_and_not_cached() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)
    issuer.fail_next = True

    failed = await cache.current()
    recovered = await cache.current()

    assert isinstance(failed, ProviderResult)
    assert failed.category is ErrorCategory.NETWORK
    assert recovered == "token-1"


async def test_forget_drops_the_token() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)
    await cache.current()

    cache.forget()

    assert await cache.current() == "token-2"
    assert "token" not in repr(cache).replace("AccessTokenCache", "")


async def test_a_hung_fetch_ends_the_wait_just_before_the_deadline_as_a_retryable_failure() -> None:
    issuer, clock = Issuer(held=True), FakeClock()
    cache = cache_for(issuer, clock)
    deadline = clock.now() + timedelta(seconds=10)

    waiting = asyncio.ensure_future(cache.current(deadline=deadline))
    await clock.advance(9.9)
    assert not waiting.done()
    # Before the deadline itself, where the engine would cut the call off as an unknown outcome.
    await clock.advance(0.09)
    result = await waiting

    assert isinstance(result, ProviderResult)
    assert (result.category, result.provider_code, result.retryable) == (
        C.TEMPORARY_REMOTE,
        "X_ACCESS_TOKEN_TIMEOUT",
        True,
    )
    await clock.advance(0)
    assert (issuer.cancelled, cache.in_flight) == (1, 0), "a fetch nobody waits for is stopped"


async def test_a_deadline_already_spent_fetches_nothing() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)

    result = await cache.current(deadline=clock.now())

    assert isinstance(result, ProviderResult)
    assert result.provider_code == "X_ACCESS_TOKEN_TIMEOUT"
    assert issuer.started == 0


@pytest.mark.parametrize("how", ["token", "task", "deadline"])
async def test_one_waiter_giving_up_leaves_the_shared_fetch_to_the_others(how: str) -> None:
    issuer, clock = Issuer(held=True), FakeClock()
    cache = cache_for(issuer, clock)
    item_token = CancellationToken()
    deadline = clock.now() + timedelta(seconds=5) if how == "deadline" else None

    leaving = asyncio.ensure_future(cache.current(deadline=deadline, token=item_token))
    staying = [asyncio.ensure_future(cache.current(token=CancellationToken())) for _ in range(3)]
    await clock.advance(0)
    if how == "token":
        item_token.cancel("operator")
    elif how == "task":
        leaving.cancel()
    else:
        await clock.advance(5)
    [left] = await asyncio.gather(leaving, return_exceptions=True)
    assert not any(task.done() for task in staying)
    issuer.release.set()
    tokens = await asyncio.gather(*staying)

    expected = {"token": "X_CANCELLED", "deadline": "X_ACCESS_TOKEN_TIMEOUT"}.get(how)
    if expected is None:
        assert isinstance(left, asyncio.CancelledError)
    else:
        assert isinstance(left, ProviderResult)
        assert left.provider_code == expected
    assert tokens == ["token-1"] * 3
    assert (issuer.started, issuer.cancelled) == (1, 0)


async def test_a_send_cancelled_before_it_needs_a_token_starts_no_fetch() -> None:
    issuer, clock = Issuer(), FakeClock()
    cache = cache_for(issuer, clock)
    item_token = CancellationToken()
    item_token.cancel("operator")

    result = await cache.current(token=item_token)

    assert isinstance(result, ProviderResult)
    assert (result.category, result.provider_code) == (C.CANCELLED, "X_CANCELLED")
    assert issuer.started == 0


async def test_after_an_abandoned_fetch_the_next_send_fetches_afresh() -> None:
    issuer, clock = Issuer(held=True), FakeClock()
    cache = cache_for(issuer, clock)
    item_token = CancellationToken()
    leaving = asyncio.ensure_future(cache.current(token=item_token))
    await clock.advance(0)
    item_token.cancel("operator")
    await leaving

    issuer.release.set()
    token = await cache.current()

    assert token == "token-1"
    assert (issuer.started, issuer.cancelled) == (2, 1)


async def test_close_stops_a_fetch_in_flight_and_its_waiters_are_told() -> None:
    issuer, clock = Issuer(held=True), FakeClock()
    cache = cache_for(issuer, clock)
    waiting = asyncio.ensure_future(cache.current())
    await clock.advance(0)

    await cache.close()
    result = await waiting

    assert isinstance(result, ProviderResult)
    assert result.category is C.CANCELLED
    assert (issuer.cancelled, cache.in_flight) == (1, 0)
    await cache.close()
