"""Session-scoped access tokens (WeCom application, WeChat Official Account, Mini Program).

The vendor stand-in issues tokens and rejects any it did not issue or has
expired, with the vendor's own expired-token code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from wepush.agent.engine import (
    ExecutionEngine,
    ExecutionPolicies,
    ExecutionPorts,
    ItemState,
    ProviderRef,
    RunExecutionSpec,
    TimeoutPolicy,
)
from wepush.agent.engine.testing import (
    FakeClock,
    InMemoryArtifactSink,
    InMemoryEventSink,
    InMemoryRecipientSource,
    InMemoryResultSink,
)
from wepush.agent.providers.spi import CancellationToken, ErrorCategory
from wepush.agent.providers.testing import ScriptedResponse, VendorServer

from ._http_cases import TOKEN_CASES, HttpCase
from ._stages import HttpStage, open_session, send

C = ErrorCategory


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_one_token_is_fetched_per_session_and_shared_by_concurrent_sends(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    message = case.message()
    session = await open_session(stage.factory, case.account(), message, case.resolver(), concurrency=16)
    try:
        results = await asyncio.gather(*(send(session, case.recipient(n), message) for n in range(1, 17)))
    finally:
        await session.close()

    assert all(r.success for r in results)
    assert len(stage.token_fetches()) == 1
    assert {r.query["access_token"] for r in stage.sends()} == {stage.tokens.issued[0]}


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_an_expired_token_is_refreshed_once_and_the_send_retried(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    message = case.message()
    session = await open_session(stage.factory, case.account(), message, case.resolver())
    try:
        first = await send(session, case.recipient(1), message)
        stage.tokens.expire_all()
        second = await send(session, case.recipient(2), message)
    finally:
        await session.close()

    assert first.success
    assert second.success
    assert len(stage.token_fetches()) == 2
    tokens_used = [r.query["access_token"] for r in stage.sends()]
    assert tokens_used == [stage.tokens.issued[0], stage.tokens.issued[0], stage.tokens.issued[1]]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_token_rejected_again_after_the_refresh_fails_without_looping(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    stage.tokens.reject_all = True

    result = await stage.send_one()

    assert (result.category, result.provider_code) == (
        C.AUTHENTICATION,
        f"{case.table.prefix}_ACCESS_TOKEN_REJECTED",
    )
    assert not result.retryable
    assert (len(stage.token_fetches()), len(stage.sends())) == (2, 2)
    assert "after one refresh" in (result.diagnostic or "")


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_many_sends_seeing_an_expired_token_cause_a_single_refresh(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    message = case.message()
    session = await open_session(stage.factory, case.account(), message, case.resolver(), concurrency=12)
    try:
        assert (await send(session, case.recipient(1), message)).success
        stage.tokens.expire_all()
        results = await asyncio.gather(*(send(session, case.recipient(n), message) for n in range(2, 14)))
    finally:
        await session.close()

    assert all(r.success for r in results)
    assert len(stage.token_fetches()) == 2


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
@pytest.mark.parametrize("refusal", ["40013", "40001"])
async def test_the_token_endpoint_refusing_the_app_credentials_is_an_authentication_failure(
    case: HttpCase, refusal: str, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    stage.tokens.grant_answers.append(case.error_answer(refusal, f"invalid credential {case.secrets}"))

    result = await stage.send_one()

    assert (result.category, result.provider_code) == (
        C.AUTHENTICATION,
        f"{case.table.prefix}_CREDENTIALS_REJECTED",
    )
    assert stage.sends() == []
    assert not [s for s in case.secrets.values() if s in (result.diagnostic or "")]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_token_endpoint_outage_is_temporary(case: HttpCase, vendor: VendorServer) -> None:
    stage = HttpStage(case, vendor)
    stage.tokens.grant_answers.append(ScriptedResponse(503, body=b"busy"))

    failed = await stage.send_one()
    recovered = await stage.send_one()

    assert (failed.category, failed.retryable) == (C.TEMPORARY_REMOTE, True)
    assert "access token" in (failed.diagnostic or "")
    assert recovered.success


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_connection_test_fetches_a_token_and_sends_nothing(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)

    accepted = await stage.factory.test_connection(case.account(), case.resolver(), timedelta(seconds=5))
    stage.tokens.grant_answers.append(case.error_answer("40013", "invalid appid"))
    refused = await stage.factory.test_connection(case.account(), case.resolver(), timedelta(seconds=5))

    assert accepted.ok
    assert (refused.ok, refused.category) == (False, C.AUTHENTICATION)
    assert stage.sends() == []
    assert len(stage.token_fetches()) == 2


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_token_endpoint_outage_honours_its_retry_after(case: HttpCase, vendor: VendorServer) -> None:
    stage = HttpStage(case, vendor)
    stage.tokens.grant_answers.append(ScriptedResponse(503, body=b"busy", headers={"Retry-After": "30"}))

    failed = await stage.send_one()

    assert (failed.category, failed.retryable) == (C.TEMPORARY_REMOTE, True)
    assert failed.retry_after == timedelta(seconds=30)
    assert stage.sends() == []


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_token_request_timing_out_is_a_retryable_failure_with_nothing_sent(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    assert case.token_path is not None
    vendor.enqueue(case.token_path, ScriptedResponse(200, json={}, delay_seconds=5))

    result = await stage.send_one(account=case.account(requestTimeout="PT0.3S"))

    # Not the send's own ``*_TIMEOUT`` (TIMEOUT, "may have been delivered"): no message went out.
    assert (result.category, result.provider_code, result.retryable) == (
        C.TEMPORARY_REMOTE,
        f"{case.table.prefix}_ACCESS_TOKEN_TIMEOUT",
        True,
    )
    assert "nothing was sent" in (result.diagnostic or "")
    assert stage.sends() == []


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_connection_dropped_at_the_token_endpoint_is_a_retryable_failure_with_nothing_sent(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    message = case.message()
    async with stage.break_token_endpoint("cut") as factory:
        session = await open_session(factory, case.account(), message, case.resolver())
        try:
            failed = await send(session, case.recipient(1), message)
            recovered = await send(session, case.recipient(2), message)
        finally:
            await session.close()

    # Not the send's own ``*_CONNECTION_LOST`` (not retryable, "may have been delivered"): no message went out.
    assert (failed.category, failed.provider_code, failed.retryable) == (
        C.NETWORK,
        f"{case.table.prefix}_ACCESS_TOKEN_CONNECTION_LOST",
        True,
    )
    assert "nothing was sent" in (failed.diagnostic or "")
    assert recovered.success, "the next send fetches a token afresh"
    assert len(stage.token_fetches()) == 2
    assert [r.query["access_token"] for r in stage.sends()] == [stage.tokens.issued[1]]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
@pytest.mark.parametrize(
    "answer",
    [
        ScriptedResponse(200, body=b"<html>proxy page</html>"),
        ScriptedResponse(200, json={"errcode": 0, "errmsg": "ok"}),
        ScriptedResponse(
            200, body=b'{"access_token": "cut off', headers={"Content-Type": "application/json"}
        ),
        "not HTTP",
    ],
    ids=["html-page", "no-token", "not-json", "not-http"],
)
async def test_a_token_answer_without_a_readable_token_is_a_retryable_failure_with_nothing_sent(
    case: HttpCase, answer: ScriptedResponse | str, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    if isinstance(answer, ScriptedResponse):
        stage.tokens.grant_answers.append(answer)
        result = await stage.send_one()
    else:
        async with stage.break_token_endpoint("garble") as factory:
            result = await stage.send_one(factory=factory)

    # Not ``*_RESPONSE_UNREADABLE`` (UNKNOWN, "delivery is unconfirmed"): a token request delivers nothing.
    assert (result.category, result.provider_code, result.retryable) == (
        C.TEMPORARY_REMOTE,
        f"{case.table.prefix}_ACCESS_TOKEN_UNREADABLE",
        True,
    )
    assert "nothing was sent" in (result.diagnostic or "")
    assert stage.sends() == []
    assert len(stage.token_fetches()) == 1


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_a_hung_token_endpoint_ends_the_send_at_its_item_deadline(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    release = stage.hold_token_endpoint()
    clock = FakeClock()
    message = case.message()
    # A request timeout far beyond the test's own bound: only the item deadline can end the wait.
    account = case.account(requestTimeout="PT120S")
    session = await open_session(stage.factory, account, message, case.resolver(), clock=clock)
    try:
        deadline = clock.now() + timedelta(seconds=10)
        sending = asyncio.ensure_future(send(session, case.recipient(1), message, deadline=deadline))
        await asyncio.wait_for(vendor.wait_for_requests(1), 5)
        await clock.advance(9)
        still_waiting = not sending.done()
        await clock.advance(1)
        result = await asyncio.wait_for(sending, 5)
    finally:
        release.set()
        await session.close()

    assert still_waiting
    assert (result.category, result.provider_code, result.retryable) == (
        C.TEMPORARY_REMOTE,
        f"{case.table.prefix}_ACCESS_TOKEN_TIMEOUT",
        True,
    )
    assert stage.sends() == []


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
@pytest.mark.parametrize("how", ["token", "task"])
async def test_cancelling_one_send_waiting_for_the_token_does_not_fail_the_others(
    case: HttpCase, how: str, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    release = stage.hold_token_endpoint()
    message = case.message()
    session = await open_session(stage.factory, case.account(), message, case.resolver(), concurrency=4)
    item_token = CancellationToken()
    try:
        cancelled = asyncio.ensure_future(send(session, case.recipient(1), message, item_token))
        others = [asyncio.ensure_future(send(session, case.recipient(n), message)) for n in (2, 3)]
        await asyncio.wait_for(vendor.wait_for_requests(1), 5)
        if how == "token":
            item_token.cancel("operator")
        else:
            cancelled.cancel()
        gave_up = await asyncio.wait_for(asyncio.gather(cancelled, return_exceptions=True), 5)
        others_still_waiting = not any(task.done() for task in others)
        release.set()
        delivered = await asyncio.wait_for(asyncio.gather(*others), 5)
    finally:
        release.set()
        await session.close()

    if how == "token":
        [result] = gave_up
        assert not isinstance(result, BaseException)
        assert (result.category, result.provider_code) == (C.CANCELLED, f"{case.table.prefix}_CANCELLED")
    else:
        assert isinstance(gave_up[0], asyncio.CancelledError)
    assert others_still_waiting
    assert all(r.success for r in delivered)
    assert len(stage.token_fetches()) == 1, "the other sends kept waiting for the same fetch"
    assert [r.query["access_token"] for r in stage.sends()] == [stage.tokens.issued[0]] * 2


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
async def test_an_item_whose_token_never_comes_fails_retryably_instead_of_ending_unknown(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    release = stage.hold_token_endpoint()
    clock = FakeClock()
    results = InMemoryResultSink()
    spec = RunExecutionSpec(
        run_id="run-token-deadline",
        provider=ProviderRef(case.provider_id),
        account_config=case.account(requestTimeout="PT120S"),
        message_config=case.message(),
        policies=ExecutionPolicies(timeout=TimeoutPolicy(item=timedelta(seconds=10))),
    )
    ports = ExecutionPorts(
        recipient_source=InMemoryRecipientSource(records=iter([case.recipient(1)])),
        secret_resolver=case.resolver(),
        result_sink=results,
        artifact_sink=InMemoryArtifactSink(),
        event_sink=InMemoryEventSink(),
        clock=clock,
    )
    try:
        handle = await ExecutionEngine({case.provider_id: stage.factory}).start(spec, ports)
        await asyncio.wait_for(vendor.wait_for_requests(1), 5)
        # To the item deadline: the engine cuts a call still running then off as an unknown outcome.
        await clock.advance(10)
        await asyncio.wait_for(handle.completion(), 5)
    finally:
        release.set()

    [result] = results.results.values()
    assert (result.state, result.error_category, result.provider_code) == (
        ItemState.FAILED,
        C.TEMPORARY_REMOTE,
        f"{case.table.prefix}_ACCESS_TOKEN_TIMEOUT",
    )
    assert stage.sends() == []
