"""A send whose outcome is uncertain ends UNKNOWN, not FAILED: the providers' real rows through the engine.

A connection lost after the request went out may hide a delivered message. Counting it FAILED would
have "resend the failed items" send it twice; a connection that never carried the message is FAILED.
"""

from __future__ import annotations

from datetime import timedelta

import aiohttp

from wepush.agent.engine import (
    ErrorCategory,
    ItemState,
    ProviderCapabilities,
    ProviderResult,
    RetryPolicy,
)
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.http._transport import TransportFailure, classify_exception
from wepush.agent.providers.standard.feishu_bot import FEISHU_TABLE
from wepush.agent.providers.standard.smtp import SMTP_TABLE
from wepush.agent.providers.standard.wechat_mp import WECHAT_MP_TABLE

from .support import Harness, assert_accounted, policies, spec

OK = ProviderResult.ok()


def _http(failure: TransportFailure) -> ProviderResult:
    """What the HTTP provider's session reports for a transport failure."""
    return ProviderResult.failure(
        failure.mapping.category, failure.mapping.code, failure.diagnostic, retryable=failure.retryable
    )


HTTP_LOST = _http(classify_exception(aiohttp.ServerDisconnectedError(), "POST", "https://vendor.test"))
FEISHU_LOST = FEISHU_TABLE.fail(FEISHU_TABLE.local("CONNECTION_LOST"), "connection was lost mid-request")
WECHAT_MP_LOST = WECHAT_MP_TABLE.fail(WECHAT_MP_TABLE.local("CONNECTION_LOST"), "lost mid-request")
SMTP_LOST = SMTP_TABLE.fail("SMTP_CONNECTION_LOST", "connection dropped during DATA")
FEISHU_UNREACHABLE = FEISHU_TABLE.fail(FEISHU_TABLE.local("CONNECT_FAILED"), "cannot connect")
SMTP_DISCONNECTED = SMTP_TABLE.fail("SMTP_DISCONNECTED", "closed the connection at RCPT")
WECHAT_MP_TIMEOUT = WECHAT_MP_TABLE.fail(WECHAT_MP_TABLE.local("TIMEOUT"), "did not answer in time")
HTTP_NO_CONNECTION = _http(
    classify_exception(aiohttp.ConnectionTimeoutError(), "POST", "https://vendor.test")
)
FEISHU_NO_CONNECTION = FEISHU_TABLE.fail(FEISHU_TABLE.local("CONNECT_TIMEOUT"), "connecting timed out")
SMTP_NO_CONNECTION = SMTP_TABLE.fail("SMTP_CONNECT_TIMEOUT", "connecting timed out")
SMTP_NO_AUTH_ANSWER = SMTP_TABLE.fail("SMTP_COMMAND_TIMEOUT", "did not answer AUTH in time")


async def test_a_connection_lost_mid_request_ends_unknown_and_is_never_sent_again() -> None:
    h = Harness(count=7)
    # WeChat declares timeouts safe to retry (it drops repeats): that must keep working.
    provider = FakeProviderFactory(
        capabilities=ProviderCapabilities(safe_to_retry_on_timeout=True),
        by_sequence={
            1: [HTTP_LOST, OK],
            2: [FEISHU_LOST, OK],
            3: [WECHAT_MP_LOST, OK],
            4: [SMTP_LOST, OK],
            5: [FEISHU_UNREACHABLE] * 3,
            6: [SMTP_DISCONNECTED] * 3,
            7: [WECHAT_MP_TIMEOUT, OK],
        },
    )

    summary = await h.run(provider)

    results = {r.sequence: r for r in h.results.results.values()}
    assert {n: (r.state, r.attempt) for n, r in results.items()} == {
        1: (ItemState.UNKNOWN, 1),
        2: (ItemState.UNKNOWN, 1),
        3: (ItemState.UNKNOWN, 1),
        4: (ItemState.UNKNOWN, 1),
        5: (ItemState.FAILED, 3),
        6: (ItemState.FAILED, 3),
        7: (ItemState.SUCCEEDED, 2),
    }
    assert [results[n].provider_code for n in (1, 2, 3, 4)] == [
        "HTTP_CONNECTION_LOST",
        "FEISHU_CONNECTION_LOST",
        "WECHAT_MP_CONNECTION_LOST",
        "SMTP_CONNECTION_LOST",
    ]
    assert (summary.succeeded, summary.failed, summary.unknown, summary.retried) == (1, 2, 4, 5)
    assert {a.name: a.record_count for a in summary.artifacts} == {
        "success.jsonl": 1,
        "failed.jsonl": 2,
        "unknown.jsonl": 4,
    }
    assert_accounted(summary, h)


async def test_a_policy_that_names_unknown_may_retry_a_lost_connection() -> None:
    h = Harness(count=1)
    retry = RetryPolicy(jitter=timedelta(0), retry_on=frozenset({ErrorCategory.UNKNOWN}))
    provider = FakeProviderFactory(by_sequence={1: [FEISHU_LOST, OK]})

    await h.run(provider, spec(policy=policies(retry=retry)))

    [result] = h.results.results.values()
    assert (result.state, result.attempt) == (ItemState.SUCCEEDED, 2)


async def test_a_connect_timeout_sent_nothing_so_it_is_retried_and_ends_failed() -> None:
    """Before, a vendor that could not be reached in time left every item UNKNOWN ("may have been
    delivered") and unretried, although no byte had left: a timeout while connecting is a NETWORK failure."""
    h = Harness(count=5)
    provider = FakeProviderFactory(
        by_sequence={
            1: [HTTP_NO_CONNECTION, OK],
            2: [FEISHU_NO_CONNECTION, OK],
            3: [SMTP_NO_CONNECTION, OK],
            4: [HTTP_NO_CONNECTION] * 3,
            5: [SMTP_NO_AUTH_ANSWER, OK],  # before DATA: nothing was sent either
        },
    )

    summary = await h.run(provider)

    results = {r.sequence: r for r in h.results.results.values()}
    assert {n: (r.state, r.attempt) for n, r in results.items()} == {
        1: (ItemState.SUCCEEDED, 2),
        2: (ItemState.SUCCEEDED, 2),
        3: (ItemState.SUCCEEDED, 2),
        4: (ItemState.FAILED, 3),
        5: (ItemState.SUCCEEDED, 2),
    }
    assert (results[4].provider_code, results[4].error_category) == (
        "HTTP_CONNECT_TIMEOUT",
        ErrorCategory.NETWORK,
    )
    assert summary.unknown == 0
    assert_accounted(summary, h)
