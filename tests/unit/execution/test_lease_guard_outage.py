"""``LeaseGuard.retrying``: an executing run waits out a database outage for as long as its lease may still
be its own, and gives the run up (``LeaseExpired``) only once the lease's expiry has passed. A stepped
clock stands in for time: every wait moves it on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import cast

import pytest

from wepush.server.application.execution import LeaseGuard
from wepush.server.domain import (
    DatabaseBusy,
    DatabaseUnavailable,
    FencingToken,
    LeaseExpired,
    LeaseFence,
    NotFound,
    UnitOfWorkFactory,
)

FENCE = LeaseFence("lease-1", 1, FencingToken("token-1"))
START = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)
TTL = timedelta(seconds=30)


class Time:
    """The guard's clock and sleep: sleeping moves the clock on by exactly the time slept."""

    def __init__(self) -> None:
        self.now = START
        self.slept: list[float] = []

    def clock(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


def _guard(time: Time, *, expires_at: datetime | None = START + TTL) -> LeaseGuard:
    return LeaseGuard(
        cast(UnitOfWorkFactory, object()), FENCE, time.clock, expires_at=expires_at, sleep=time.sleep
    )


def _down_until(time: Time, back_at: datetime) -> Callable[[], Awaitable[str]]:
    """An operation whose database cannot be used until ``back_at``."""

    async def operation() -> str:
        if time.now < back_at:
            raise DatabaseUnavailable()
        return "stored"

    return operation


async def test_an_outage_shorter_than_the_lease_is_waited_out() -> None:
    time = Time()
    guard = _guard(time)

    stored = await guard.retrying(_down_until(time, START + timedelta(seconds=20)))

    assert stored == "stored"
    assert START + timedelta(seconds=20) <= time.now < START + timedelta(seconds=21)
    # Soon after a blip, then about once a second: no tight loop against a database coming back.
    assert time.slept[:4] == pytest.approx([0.1, 0.2, 0.4, 0.8])
    assert max(time.slept) == 1.0


async def test_a_busy_database_is_waited_out_too() -> None:
    time = Time()
    failures: list[Exception] = [DatabaseBusy(), DatabaseBusy(), DatabaseUnavailable()]

    async def operation() -> str:
        if failures:
            raise failures.pop(0)
        return "stored"

    assert await _guard(time).retrying(operation) == "stored"
    assert len(time.slept) == 3


async def test_an_outage_that_outlasts_the_lease_gives_the_run_up_at_the_expiry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = Time()
    guard = _guard(time)

    with pytest.raises(LeaseExpired):
        await guard.retrying(_down_until(time, START + timedelta(minutes=5)))
    # Never waits past the expiry, and gives up as soon as it has passed.
    assert time.now == START + TTL
    # Every later write gives up at once; the log says why, once.
    with pytest.raises(LeaseExpired):
        await guard.retrying(_down_until(time, START + timedelta(minutes=5)))
    assert time.now == START + TTL
    told = [r for r in caplog.records if getattr(r, "event", None) == "LEASE_OUTLASTED_BY_OUTAGE"]
    assert [r.levelname for r in told] == ["WARNING"]


async def test_a_renewal_during_the_outage_lets_the_wait_go_on() -> None:
    time = Time()
    guard = _guard(time)
    back_at = START + TTL + timedelta(seconds=10)

    async def operation() -> str:
        if time.now >= START + timedelta(seconds=25):
            # The lease renewer got through (the database came back for it) and extended the lease.
            guard.extended(START + timedelta(seconds=25) + TTL)
        if time.now < back_at:
            raise DatabaseUnavailable()
        return "stored"

    assert await guard.retrying(operation) == "stored"
    assert time.now >= back_at
    assert guard.expires_at == START + timedelta(seconds=25) + TTL


async def test_an_earlier_expiry_never_shortens_the_lease() -> None:
    guard = _guard(Time())
    guard.extended(START + timedelta(seconds=5))
    assert guard.expires_at == START + TTL


@pytest.mark.parametrize("answer", [LeaseExpired("lease-1"), NotFound("run", "run-1")])
async def test_a_domain_answer_is_raised_at_once(answer: Exception) -> None:
    time = Time()
    calls = 0

    async def operation() -> None:
        nonlocal calls
        calls += 1
        raise answer

    with pytest.raises(type(answer)):
        await _guard(time).retrying(operation)
    assert (calls, time.slept) == (1, [])


async def test_a_failure_that_is_no_outage_is_tried_a_few_times_only() -> None:
    time = Time()
    calls = 0

    async def operation() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("a bug, not the database")

    with pytest.raises(RuntimeError):
        await _guard(time).retrying(operation)
    assert calls == 4
    assert time.now < START + timedelta(seconds=1)


async def test_without_a_known_expiry_an_outage_is_tried_a_few_times_only() -> None:
    time = Time()
    calls = 0

    async def operation() -> None:
        nonlocal calls
        calls += 1
        raise DatabaseUnavailable()

    with pytest.raises(DatabaseUnavailable):
        await _guard(time, expires_at=None).retrying(operation)
    assert calls == 4


class _Leases:
    def __init__(self) -> None:
        self.checked: list[LeaseFence] = []

    async def check(self, fence: LeaseFence, now: datetime) -> None:
        self.checked.append(fence)


class _Unit:
    def __init__(self, factory: _Factory) -> None:
        self._factory = factory
        self.leases = factory.leases

    async def __aenter__(self) -> _Unit:
        if self._factory.refusals:
            self._factory.refusals -= 1
            raise DatabaseUnavailable()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._factory.ended.append(kind)


class _Factory:
    """A database that refuses the first ``refusals`` connections."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.leases = _Leases()
        self.ended: list[type[BaseException] | None] = []

    def __call__(self, *, read_only: bool = False) -> _Unit:
        return _Unit(self)


async def test_a_fenced_transaction_waits_for_the_database_to_be_reachable() -> None:
    time = Time()
    factory = _Factory(refusals=3)
    guard = LeaseGuard(
        cast(UnitOfWorkFactory, factory), FENCE, time.clock, expires_at=START + TTL, sleep=time.sleep
    )

    async with guard.transaction() as uow:
        assert uow is not None

    assert factory.leases.checked == [FENCE]
    assert factory.ended == [None]
    assert len(time.slept) == 3
