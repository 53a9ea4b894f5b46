"""Retry rules per error category, Retry-After, deadlines, TIMEOUT safety and the auth circuit breaker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from wepush.agent.engine import (
    CancelRun,
    ConcurrencyPolicy,
    ErrorCategory,
    ItemResult,
    ItemState,
    ProviderCapabilities,
    ProviderResult,
    ProviderSendRequest,
    RetryPolicy,
    RunState,
    ThreadSafetyMode,
    TimeoutPolicy,
)
from wepush.agent.providers.fake import FakeProviderFactory, Hang

from .support import Harness, assert_accounted, policies, spec

OK = ProviderResult.ok()


def _fail(category: ErrorCategory, retry_after: timedelta | None = None) -> ProviderResult:
    return ProviderResult.failure(category, category.value, retry_after=retry_after)


def _one_result(h: Harness) -> ItemResult:
    [result] = h.results.results.values()
    return result


class _CallTimes:
    """Records the clock time of every call, per item."""

    def __init__(self, h: Harness, outcomes: list[ProviderResult]) -> None:
        self.h = h
        self.outcomes = outcomes
        self.times: list[float] = []

    def __call__(self, request: ProviderSendRequest) -> ProviderResult:
        self.times.append(self.h.clock.monotonic())
        return self.outcomes[min(request.attempt, len(self.outcomes)) - 1]


async def test_temporary_failures_are_retried_with_exponential_backoff() -> None:
    h = Harness(count=1)
    calls = _CallTimes(h, [_fail(ErrorCategory.TEMPORARY_REMOTE), _fail(ErrorCategory.NETWORK), OK])
    summary = await h.run(FakeProviderFactory(outcome=calls))
    assert calls.times == [0, 1, 3]  # delays 1s then 2s (initial 1s, multiplier 2, no jitter)
    result = _one_result(h)
    assert result.state is ItemState.SUCCEEDED
    assert result.attempt == 3
    assert summary.retried == 2
    assert summary.final_state is RunState.SUCCEEDED
    assert_accounted(summary, h)


async def test_rate_limited_honours_retry_after_else_backs_off() -> None:
    h = Harness(count=1)
    limited = _fail(ErrorCategory.RATE_LIMITED, retry_after=timedelta(seconds=7))
    calls = _CallTimes(h, [limited, _fail(ErrorCategory.RATE_LIMITED), OK])
    await h.run(FakeProviderFactory(outcome=calls))
    assert calls.times == [0, 7, 9]


async def test_a_temporary_failure_waits_at_least_its_retry_after_and_at_least_the_backoff() -> None:
    # A 503 with Retry-After: before, the engine ignored the delay and called back after the 1 s backoff.
    h = Harness(count=1)
    busy = _fail(ErrorCategory.TEMPORARY_REMOTE, retry_after=timedelta(seconds=5))
    soon = _fail(ErrorCategory.TEMPORARY_REMOTE, retry_after=timedelta(milliseconds=500))
    calls = _CallTimes(h, [busy, soon, OK])
    await h.run(FakeProviderFactory(outcome=calls))
    assert calls.times == [0, 5, 7]  # 5 s as asked; then the 2 s backoff, longer than the 0.5 s asked


async def test_attempts_are_bounded_by_max_attempts() -> None:
    h = Harness(count=1)
    provider = FakeProviderFactory(default=_fail(ErrorCategory.TEMPORARY_REMOTE))
    summary = await h.run(provider)
    result = _one_result(h)
    assert result.state is ItemState.FAILED
    assert result.attempt == 3
    assert result.error_category is ErrorCategory.TEMPORARY_REMOTE
    assert len(provider.calls) == 3
    assert summary.retried == 2
    assert summary.final_state is RunState.FAILED


async def test_a_retry_that_would_wake_after_the_item_deadline_is_not_made() -> None:
    h = Harness(count=1)
    retry = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), multiplier=1, jitter=timedelta(0))
    run_spec = spec(policy=policies(retry=retry, timeout=TimeoutPolicy(item=timedelta(seconds=6))))
    provider = FakeProviderFactory(default=_fail(ErrorCategory.TEMPORARY_REMOTE), latency=2.0)
    await h.run(provider, run_spec)
    # t=0..2 first call, t=3..5 second call; a third would start at t=6, the item deadline.
    assert len(provider.calls) == 2
    assert _one_result(h).state is ItemState.FAILED

    h2 = Harness(count=1)
    far = _fail(ErrorCategory.RATE_LIMITED, retry_after=timedelta(minutes=10))
    provider2 = FakeProviderFactory(default=far)
    await h2.run(provider2)
    assert len(provider2.calls) == 1


async def test_the_run_deadline_aborts_in_flight_calls_as_unknown_and_leaves_the_rest_unsent() -> None:
    h = Harness(count=100)
    run_spec = spec(
        policy=policies(
            concurrency=ConcurrencyPolicy(min=1, max=4, target=2),
            timeout=TimeoutPolicy(item=timedelta(seconds=5), run=timedelta(seconds=10)),
        )
    )
    provider = FakeProviderFactory(latency=3.0, thread_safety=ThreadSafetyMode.THREAD_SAFE)
    summary = await h.run(provider, run_spec)
    assert (summary.ended_at - summary.started_at).total_seconds() == 10
    assert summary.succeeded == 6  # three rounds of two, finished at 3, 6 and 9s
    assert summary.unknown == 2  # the fourth round was cut off at 10s
    assert summary.unsent == 92
    assert summary.final_state is RunState.PARTIAL
    codes = {r.provider_code for r in h.results.results.values() if r.state is ItemState.UNKNOWN}
    assert codes == {"RUN_DEADLINE_EXCEEDED"}
    assert_accounted(summary, h)


async def test_timeout_is_retried_only_when_the_provider_declares_it_safe() -> None:
    timeout = _fail(ErrorCategory.TIMEOUT)
    unsafe = Harness(count=1)
    await unsafe.run(FakeProviderFactory(default=None, by_sequence={1: [timeout, OK]}))
    result = _one_result(unsafe)
    assert result.state is ItemState.UNKNOWN
    assert result.attempt == 1

    safe = Harness(count=1)
    capabilities = ProviderCapabilities(safe_to_retry_on_timeout=True)
    await safe.run(FakeProviderFactory(capabilities=capabilities, by_sequence={1: [timeout, OK]}))
    result = _one_result(safe)
    assert result.state is ItemState.SUCCEEDED
    assert result.attempt == 2


async def test_an_item_deadline_hit_by_a_silent_provider_is_a_timeout_with_unknown_outcome() -> None:
    h = Harness(count=1)
    run_spec = spec(policy=policies(timeout=TimeoutPolicy(item=timedelta(seconds=20))))
    summary = await h.run(FakeProviderFactory(default=Hang(), honour_cancellation=False), run_spec)
    result = _one_result(h)
    assert result.state is ItemState.UNKNOWN
    assert result.error_category is ErrorCategory.TIMEOUT
    assert result.provider_code == "ITEM_DEADLINE_EXCEEDED"
    assert result.latency_ms == 20_000
    assert summary.final_state is RunState.FAILED


@pytest.mark.parametrize(
    ("sent", "state", "category"),
    [
        (False, ItemState.FAILED, ErrorCategory.NETWORK),  # still connecting: nothing went out
        (True, ItemState.UNKNOWN, ErrorCategory.TIMEOUT),  # connected: the message may be there
        (None, ItemState.UNKNOWN, ErrorCategory.TIMEOUT),  # a provider that tells nothing
    ],
)
async def test_an_item_deadline_that_cuts_off_a_call_which_sent_nothing_is_a_failure(
    sent: bool | None, state: ItemState, category: ErrorCategory
) -> None:
    """QA: a vendor host that drops connections and an item deadline shorter than the connect timeout
    left every item UNKNOWN ("may have been delivered") although nothing had been sent."""
    h = Harness(count=1)
    run_spec = spec(policy=policies(timeout=TimeoutPolicy(item=timedelta(seconds=20))))
    await h.run(FakeProviderFactory(default=Hang(sent=sent), honour_cancellation=False), run_spec)

    result = _one_result(h)
    assert (result.state, result.error_category, result.provider_code) == (
        state,
        category,
        "ITEM_DEADLINE_EXCEEDED",
    )
    if sent is False:
        assert (
            result.diagnostic
            == "the item deadline passed before the call reached the vendor; nothing was sent"
        )


async def test_a_run_deadline_that_cuts_off_a_call_which_sent_nothing_is_a_failure() -> None:
    h = Harness(count=1)
    run_spec = spec(policy=policies(timeout=TimeoutPolicy(item=None, run=timedelta(seconds=30))))
    await h.run(FakeProviderFactory(default=Hang(sent=False), honour_cancellation=False), run_spec)

    result = _one_result(h)
    assert (result.state, result.error_category, result.provider_code) == (
        ItemState.FAILED,
        ErrorCategory.NETWORK,
        "RUN_DEADLINE_EXCEEDED",
    )


async def test_permanent_categories_fail_at_once_and_internal_is_retried_only_on_request() -> None:
    for category, state in (
        (ErrorCategory.INVALID_REQUEST, ItemState.FAILED),
        (ErrorCategory.RECIPIENT_INVALID, ItemState.FAILED),
        (ErrorCategory.PERMANENT_REMOTE, ItemState.FAILED),
        (ErrorCategory.INTERNAL, ItemState.FAILED),
        # The provider itself cannot tell whether the message went out.
        (ErrorCategory.UNKNOWN, ItemState.UNKNOWN),
    ):
        h = Harness(count=1)
        provider = FakeProviderFactory(by_sequence={1: [_fail(category), OK]})
        await h.run(provider)
        assert len(provider.calls) == 1, category
        assert _one_result(h).state is state

    h = Harness(count=1)
    retry = RetryPolicy(jitter=timedelta(0), retry_on=frozenset({ErrorCategory.INTERNAL}))
    provider = FakeProviderFactory(by_sequence={1: [_fail(ErrorCategory.INTERNAL), OK]})
    await h.run(provider, spec(policy=policies(retry=retry)))
    assert _one_result(h).state is ItemState.SUCCEEDED
    assert len(provider.calls) == 2


async def test_a_provider_exception_is_an_internal_unknown_item_and_the_run_goes_on() -> None:
    h = Harness(count=5)
    provider = FakeProviderFactory(by_sequence={3: RuntimeError("boom password=hunter2")})
    summary = await h.run(provider)
    assert summary.final_state is RunState.PARTIAL
    assert summary.succeeded == 4
    assert summary.unknown == 1
    broken = next(r for r in h.results.results.values() if r.state is ItemState.UNKNOWN)
    assert broken.error_category is ErrorCategory.INTERNAL
    assert broken.provider_code == "PROVIDER_EXCEPTION"
    assert broken.diagnostic is not None
    assert "hunter2" not in broken.diagnostic
    assert_accounted(summary, h)


async def test_consecutive_auth_failures_open_the_circuit_and_fail_the_run() -> None:
    h = Harness(count=50)
    provider = FakeProviderFactory(default=_fail(ErrorCategory.AUTHENTICATION))
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=4, target=1)))
    summary = await h.run(provider, run_spec)
    assert len(provider.calls) == 3  # auth failures are never retried per item
    assert summary.failed == 3
    assert summary.unsent == 47
    assert summary.final_state is RunState.FAILED
    completed = h.events.events[-1]
    assert completed.data["stopReason"] == "AUTH_CIRCUIT_OPEN"
    assert_accounted(summary, h)


async def test_auth_circuit_after_some_successes_makes_a_partial_run() -> None:
    h = Harness(count=30)
    denied = _fail(ErrorCategory.AUTHORIZATION)
    provider = FakeProviderFactory(outcome=lambda r: OK if r.recipient.sequence <= 5 else denied)
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=4, target=1)))
    summary = await h.run(provider, run_spec)
    assert (summary.succeeded, summary.failed, summary.unsent) == (5, 3, 22)
    assert summary.final_state is RunState.PARTIAL
    assert_accounted(summary, h)


async def test_auth_failures_broken_up_by_successes_do_not_open_the_circuit() -> None:
    h = Harness(count=30)
    denied = _fail(ErrorCategory.AUTHENTICATION)
    provider = FakeProviderFactory(outcome=lambda r: OK if r.recipient.sequence % 3 == 0 else denied)
    run_spec = spec(policy=policies(concurrency=ConcurrencyPolicy(min=1, max=4, target=1)))
    summary = await h.run(provider, run_spec)
    assert summary.unsent == 0
    assert (summary.succeeded, summary.failed) == (10, 20)
    assert summary.final_state is RunState.PARTIAL


async def test_jitter_is_reproducible_with_a_seed_and_within_its_bound() -> None:
    from wepush.agent.engine import EngineOptions

    retry = RetryPolicy(jitter=timedelta(milliseconds=500))
    run_spec = spec(policy=policies(retry=retry))
    runs: list[list[float]] = []
    for _ in range(2):
        h = Harness(count=1)
        calls = _CallTimes(h, [_fail(ErrorCategory.NETWORK), _fail(ErrorCategory.NETWORK), OK])
        await h.run(FakeProviderFactory(outcome=calls), run_spec, EngineOptions(random_seed=7))
        runs.append(calls.times)
    assert runs[0] == runs[1]
    first, second, third = runs[0]
    assert 1.0 <= second - first <= 1.5
    assert 2.0 <= third - second <= 2.5


class _Observed:
    """An ExecutionObserver that keeps what it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, ItemState, float]] = []
        self.retries: list[ErrorCategory | None] = []

    def provider_call(self, result: ProviderResult, state: ItemState, seconds: float) -> None:
        self.calls.append((result.provider_code, state, seconds))

    def retrying(self, category: ErrorCategory | None) -> None:
        self.retries.append(category)


async def test_the_observer_sees_each_provider_call_with_its_time_and_each_retry_with_its_cause() -> None:
    observed = _Observed()
    h = Harness(count=1, observer=observed)
    calls = _CallTimes(h, [_fail(ErrorCategory.TEMPORARY_REMOTE), _fail(ErrorCategory.NETWORK), OK])
    await h.run(FakeProviderFactory(outcome=calls, latency=0.25))

    assert observed.calls == [
        ("TEMPORARY_REMOTE", ItemState.FAILED, 0.25),
        ("NETWORK", ItemState.FAILED, 0.25),
        ("OK", ItemState.SUCCEEDED, 0.25),
    ]
    assert observed.retries == [ErrorCategory.TEMPORARY_REMOTE, ErrorCategory.NETWORK]


async def test_a_retry_the_deadline_rules_out_is_not_reported_as_a_retry() -> None:
    observed = _Observed()
    h = Harness(count=1, observer=observed)
    far = _fail(ErrorCategory.RATE_LIMITED, retry_after=timedelta(minutes=10))
    await h.run(FakeProviderFactory(default=far))

    assert [state for _, state, _ in observed.calls] == [ItemState.FAILED]
    assert observed.retries == []


async def test_a_retry_cancelled_while_it_waits_is_not_reported_as_a_retry() -> None:
    """QA saw the retries metric grow by 5 where the run made one retry: a retry was reported when it was
    scheduled, before its wait, and a stop during the wait left it counted but never made."""
    observed = _Observed()
    h = Harness(count=1, observer=observed)
    retry = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=10), jitter=timedelta(0))
    handle = await h.start(
        FakeProviderFactory(default=_fail(ErrorCategory.TEMPORARY_REMOTE)), spec(policy=policies(retry=retry))
    )
    await h.clock.advance(1)  # the first call failed; its retry waits 10 s
    assert [state for _, state, _ in observed.calls] == [ItemState.FAILED]

    assert (await handle.submit(CancelRun("stop"))).accepted
    summary = await h.clock.run(handle.completion())

    assert len(observed.calls) == 1
    assert observed.retries == []
    assert summary.retried == 0
