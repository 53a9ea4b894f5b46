"""The per-token request budget, driven by a clock the test moves."""

from __future__ import annotations

import pytest

from wepush.server.application.request_budget import RateLimited, RequestBudget


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_may_spend_its_burst_at_once_and_is_then_told_how_long_to_wait() -> None:
    clock = _Clock()
    budget = RequestBudget(rate=2, burst=3, clock=clock)
    for _ in range(3):
        budget.spend("tok-a")

    with pytest.raises(RateLimited) as refused:
        budget.spend("tok-a")

    assert refused.value.code == "RATE_LIMITED"
    assert refused.value.retry_after_seconds == 1
    assert "tok-a" not in str(refused.value)


def test_the_budget_refills_at_the_rate_and_never_beyond_the_burst() -> None:
    clock = _Clock()
    budget = RequestBudget(rate=2, burst=3, clock=clock)
    for _ in range(3):
        budget.spend("tok-a")
    clock.now += 0.5  # one request earned
    budget.spend("tok-a")
    with pytest.raises(RateLimited):
        budget.spend("tok-a")

    clock.now += 3600  # a quiet hour saves up no more than the burst
    for _ in range(3):
        budget.spend("tok-a")
    with pytest.raises(RateLimited):
        budget.spend("tok-a")


def test_the_wait_asked_for_covers_a_slow_rate() -> None:
    clock = _Clock()
    budget = RequestBudget(rate=1, burst=1, clock=clock)
    budget.spend("tok-a")
    clock.now += 0.25
    with pytest.raises(RateLimited) as refused:
        budget.spend("tok-a")
    assert refused.value.retry_after_seconds == 1  # 0.75 s rounded up: waiting that long succeeds
    clock.now += 0.75
    budget.spend("tok-a")


def test_one_token_spending_its_budget_leaves_another_tokens_budget_whole() -> None:
    clock = _Clock()
    budget = RequestBudget(rate=1, burst=2, clock=clock)
    budget.spend("tok-a")
    budget.spend("tok-a")
    with pytest.raises(RateLimited):
        budget.spend("tok-a")

    budget.spend("tok-b")
    budget.spend("tok-b")


def test_a_clock_stepping_back_does_not_drain_the_bucket() -> None:
    clock = _Clock()
    budget = RequestBudget(rate=1, burst=2, clock=clock)
    budget.spend("tok-a")
    clock.now -= 50
    budget.spend("tok-a")
    with pytest.raises(RateLimited):
        budget.spend("tok-a")


def test_rate_zero_admits_everything() -> None:
    budget = RequestBudget(rate=0, burst=1, clock=_Clock())
    assert not budget.enabled
    for _ in range(10_000):
        budget.spend("tok-a")


@pytest.mark.parametrize(("rate", "burst"), [(-1, 10), (10, 0)])
def test_a_negative_rate_or_an_empty_burst_is_refused(rate: int, burst: int) -> None:
    with pytest.raises(ValueError, match="rate"):
        RequestBudget(rate=rate, burst=burst, clock=_Clock())
