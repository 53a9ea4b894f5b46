"""Session-scoped access tokens (WeCom application, WeChat Official Account, Mini Program).

The vendor stand-in issues tokens and rejects any it did not issue or has
expired, with the vendor's own expired-token code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from wepush.agent.providers.spi import ErrorCategory
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
