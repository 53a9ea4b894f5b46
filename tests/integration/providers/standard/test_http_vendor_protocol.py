"""The HTTP vendor providers against local servers that check what the vendors check.

One harness, parametrized over the case table in ``_http_cases``: every test
runs for every vendor it applies to.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from yarl import URL

from wepush.agent.engine import RecipientRecord
from wepush.agent.providers.spi import CancellationToken, ErrorCategory, ProviderPreviewRequest
from wepush.agent.providers.standard._vendor import MASK
from wepush.agent.providers.testing import ScriptedResponse, VendorServer

from ._http_cases import HTTP_CASES, HttpCase, recipient_values
from ._stages import HttpStage, open_session, send

C = ErrorCategory
CODE_ROWS = [
    pytest.param(case, vendor_code, code, category, id=f"{case.provider_id}-{vendor_code}")
    for case in HTTP_CASES
    for vendor_code, code, category in case.vendor_codes()
]


def _leaks(stage: HttpStage, text: str | None) -> list[str]:
    return [secret for secret in stage.secret_literals() if text and secret in text]


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_sends_exactly_the_request_the_vendor_verifies(case: HttpCase, vendor: VendorServer) -> None:
    stage = HttpStage(case, vendor)

    result = await stage.send_one(record=case.recipient(3))

    assert result.success, result
    [request] = stage.sends()
    case.verify(request, recipient_values(3))
    if case.token_path is not None:
        [fetch] = stage.token_fetches()
        assert (fetch.method, dict(fetch.query)) == ("GET", dict(case.token_query))
        assert request.query["access_token"] == stage.tokens.issued[0]


@pytest.mark.parametrize(("case", "vendor_code", "code", "category"), CODE_ROWS)
async def test_each_vendor_error_code_has_its_documented_category(
    case: HttpCase, vendor_code: str, code: str, category: ErrorCategory, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    answer = case.error_answer(vendor_code, "scripted vendor failure")
    # Queued twice: a token code is retried once after a refresh and must fail again.
    vendor.enqueue(case.send_path, answer, answer)

    result = await stage.send_one()

    row = case.table[code]
    assert (result.success, result.category, result.provider_code) == (False, category, code)
    assert result.retryable is row.retryable
    assert vendor_code.split(":")[0] in (result.diagnostic or "")
    assert not _leaks(stage, result.diagnostic)


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
@pytest.mark.parametrize(
    ("status", "category", "suffix"),
    [
        (401, C.AUTHENTICATION, "HTTP_UNAUTHORIZED"),
        (403, C.AUTHORIZATION, "HTTP_FORBIDDEN"),
        (429, C.RATE_LIMITED, "HTTP_RATE_LIMITED"),
        (502, C.TEMPORARY_REMOTE, "HTTP_SERVER_ERROR"),
        (503, C.TEMPORARY_REMOTE, "HTTP_SERVER_ERROR"),
        (404, C.PERMANENT_REMOTE, "HTTP_REJECTED"),
        (302, C.PERMANENT_REMOTE, "HTTP_REJECTED"),
    ],
)
async def test_http_status_without_a_vendor_code_is_classified(
    case: HttpCase, status: int, category: ErrorCategory, suffix: str, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    headers = {"Retry-After": "7", "Location": "https://elsewhere.example/"}
    vendor.enqueue(case.send_path, ScriptedResponse(status, body=b"<html>gateway</html>", headers=headers))

    result = await stage.send_one()

    assert (result.category, result.provider_code) == (category, f"{case.table.prefix}_{suffix}")
    # RFC 9110 §10.2.3: Retry-After means something on a 429 and a 503 only.
    assert result.retry_after == (timedelta(seconds=7) if status in {429, 503} else None)
    assert len(stage.sends()) == 1, "redirects are never followed"


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_an_answer_without_a_readable_result_is_unknown_and_reading_is_bounded(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    huge = json.dumps({"padding": "x" * (1024 * 1024)}).encode()
    vendor.enqueue(case.send_path, ScriptedResponse(200, body=b"<html>not json</html>"))
    vendor.enqueue(
        case.send_path, ScriptedResponse(200, body=huge, headers={"Content-Type": "application/json"})
    )

    not_json = await stage.send_one()
    oversized = await stage.send_one()

    for result in (not_json, oversized):
        assert (result.category, result.provider_code) == (
            C.UNKNOWN,
            f"{case.table.prefix}_RESPONSE_UNREADABLE",
        )
        assert not result.retryable
    assert "cut off" in (oversized.diagnostic or "")
    assert len(oversized.diagnostic or "") < 300


ODD_RETRY_AFTER = [
    pytest.param("Wed, 21 Oct 2099 07:28:00 GMT", timedelta(hours=1), id="http-date"),
    pytest.param("\u00b2", None, id="superscript-digit"),
    pytest.param("100000000000000", timedelta(hours=1), id="beyond-timedelta"),
]


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
@pytest.mark.parametrize(("header", "expected"), ODD_RETRY_AFTER)
async def test_a_429_stays_rate_limited_whatever_its_retry_after_says(
    case: HttpCase, header: str, expected: timedelta | None, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    vendor.enqueue(case.send_path, ScriptedResponse(429, body=b"slow down", headers={"Retry-After": header}))

    result = await stage.send_one()

    assert (result.category, result.provider_code) == (
        C.RATE_LIMITED,
        f"{case.table.prefix}_HTTP_RATE_LIMITED",
    )
    assert result.retry_after == expected


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Retry-After": "42"}, timedelta(seconds=42), id="delta-seconds"),
        *(pytest.param({"Retry-After": p.values[0]}, p.values[1], id=p.id) for p in ODD_RETRY_AFTER),
        pytest.param({}, None, id="absent"),
    ],
)
async def test_a_503_is_retried_after_what_its_retry_after_says(
    case: HttpCase, headers: dict[str, str], expected: timedelta | None, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    vendor.enqueue(case.send_path, ScriptedResponse(503, body=b"maintenance", headers=headers))

    result = await stage.send_one()

    assert (result.category, result.provider_code, result.retryable) == (
        C.TEMPORARY_REMOTE,
        f"{case.table.prefix}_HTTP_SERVER_ERROR",
        True,
    )
    assert result.retry_after == expected


BUSY_ROWS = [
    pytest.param(case, vendor_code, id=f"{case.provider_id}-{vendor_code}")
    for case in HTTP_CASES
    for vendor_code, _code, category in case.vendor_codes()
    if category is C.TEMPORARY_REMOTE
]


@pytest.mark.parametrize(("case", "vendor_code"), BUSY_ROWS)
async def test_a_vendor_busy_code_on_a_503_keeps_its_row_and_takes_the_retry_after(
    case: HttpCase, vendor_code: str, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    answer = case.error_answer(vendor_code, "system busy")
    busy = ScriptedResponse(503, body=answer.payload()[0], headers={"Retry-After": "12"})
    permanent = next(v for v, _c, category in case.vendor_codes() if category is C.INVALID_REQUEST)
    refused = ScriptedResponse(
        503, body=case.error_answer(permanent, "bad").payload()[0], headers={"Retry-After": "12"}
    )
    vendor.enqueue(case.send_path, busy, refused)

    retried = await stage.send_one()
    not_retried = await stage.send_one()

    row = case.table.for_vendor(vendor_code)
    assert row is not None
    assert (retried.provider_code, retried.retry_after) == (row.code, timedelta(seconds=12))
    assert not not_retried.retryable
    assert not_retried.retry_after is None, "a refusal that is not retried has nothing to wait for"


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_an_answer_nested_deeper_than_the_parser_goes_is_unreadable_not_internal(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    deep = ScriptedResponse(200, body=b"[" * 5000, headers={"Content-Type": "application/json"})
    vendor.enqueue(case.send_path, deep)

    result = await stage.send_one()

    assert (result.category, result.provider_code) == (
        C.UNKNOWN,
        f"{case.table.prefix}_RESPONSE_UNREADABLE",
    )


TOKEN_CASES = [case for case in HTTP_CASES if case.token_path is not None]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=str)
@pytest.mark.parametrize(
    ("answer", "category"),
    [
        # Not UNKNOWN as for a send: a token request delivers nothing (``*_ACCESS_TOKEN_UNREADABLE``).
        pytest.param(ScriptedResponse(200, body=b"[" * 5000), C.TEMPORARY_REMOTE, id="nested-too-deep"),
        pytest.param(
            ScriptedResponse(429, headers={"Retry-After": "\u00b2"}), C.RATE_LIMITED, id="superscript"
        ),
        pytest.param(
            ScriptedResponse(429, headers={"Retry-After": "100000000000000"}),
            C.RATE_LIMITED,
            id="beyond-timedelta",
        ),
    ],
)
async def test_a_connection_test_reports_an_odd_token_answer_instead_of_raising(
    case: HttpCase, answer: ScriptedResponse, category: ErrorCategory, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    assert case.token_path is not None
    vendor.enqueue(case.token_path, answer)

    result = await stage.factory.test_connection(case.account(), case.resolver(), timedelta(seconds=5))

    assert (result.ok, result.category) == (False, category)
    assert "access token request failed" in result.message


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_dry_run_and_preview_render_the_real_request_without_calling_the_vendor(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    message = case.message()
    dry = await open_session(stage.factory, case.account(), message, case.resolver(), dry_run=True)
    try:
        dry_result = await send(dry, case.recipient(4), message)
        preview = await dry.preview(ProviderPreviewRequest(message, case.recipient(4)))
    finally:
        await dry.close()
    assert dry_result.success
    assert dry_result.provider_code == "DRY_RUN"
    assert vendor.request_count == 0

    live = await stage.send_one(record=case.recipient(4))
    assert live.success
    [sent] = stage.sends()
    shown = json.dumps({"body": preview.rendered, **preview.details}, ensure_ascii=False)
    assert not _leaks(stage, shown), "a preview must mask every credential"
    url = URL(str(preview.details["url"]))
    if case.secret_in_path:
        assert url.path == case.send_path.rsplit("/", 1)[0] + "/" + MASK
    else:
        assert url.path == sent.path
        assert set(url.query) == set(sent.query)
    if preview.rendered:
        shown_body: dict[str, Any] = json.loads(preview.rendered)
        sent_body = sent.json()
        assert isinstance(sent_body, dict)
        for key in case.volatile_keys:
            assert key in shown_body
            shown_body.pop(key), sent_body.pop(key)
        assert shown_body == sent_body
    else:
        assert dict(url.query) | {"OutId": ""} == dict(sent.query) | {"OutId": ""}


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_production_endpoint_is_pinned_to_the_official_host(case: HttpCase) -> None:
    factory = case.make_factory(None)
    session = await open_session(factory, case.account(), case.message(), case.resolver(), dry_run=True)
    try:
        preview = await session.preview(ProviderPreviewRequest(case.message(), case.recipient(1)))
    finally:
        await session.close()

    assert str(URL(str(preview.details["url"])).origin()) == case.official_origin


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_diagnostics_never_carry_secrets_tokens_or_the_vendor_body(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    first = await stage.send_one()
    assert first.success
    echoed = " ".join(stage.secret_literals())
    message = f"bad request {echoed} url=https://x/?access_token={echoed} " + "tail " * 200
    vendor_code = next(v for v, _, c in case.vendor_codes() if c is C.INVALID_REQUEST)
    vendor.enqueue(case.send_path, case.error_answer(vendor_code, message))
    vendor.respond_with(None)
    vendor.enqueue(case.send_path, ScriptedResponse(500, body=echoed.encode()))

    results = [await stage.send_one(), await stage.send_one()]

    for result in results:
        assert not result.success
        assert not _leaks(stage, result.diagnostic), result.diagnostic
        assert "tail " * 30 not in (result.diagnostic or ""), (
            "only a short snippet of the answer may be quoted"
        )
        assert len(result.diagnostic or "") < 300
        assert result.response_body is None


async def _until_sent(stage: HttpStage) -> None:
    while not stage.sends():
        await stage.vendor.wait_for_requests(stage.vendor.request_count + 1)


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_cancelling_an_in_flight_call_returns_cancelled_promptly(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)
    vendor.enqueue(case.send_path, ScriptedResponse(200, json={}, delay_seconds=30))
    token = CancellationToken()
    message = case.message()
    session = await open_session(stage.factory, case.account(), message, case.resolver())
    try:
        sending = asyncio.ensure_future(send(session, case.recipient(1), message, token))
        await asyncio.wait_for(_until_sent(stage), 5)
        token.cancel("operator")
        result = await asyncio.wait_for(sending, 5)
    finally:
        await session.close()

    assert (result.category, result.provider_code, result.retryable) == (
        C.CANCELLED,
        f"{case.table.prefix}_CANCELLED",
        False,
    )


@pytest.mark.parametrize("case", HTTP_CASES, ids=str)
async def test_a_recipient_the_provider_cannot_address_is_refused_before_any_call(
    case: HttpCase, vendor: VendorServer
) -> None:
    stage = HttpStage(case, vendor)

    result = await stage.send_one(record=RecipientRecord.of("bad", 1, dict(case.bad_recipient)))

    assert result.category is C.RECIPIENT_INVALID
    assert result.provider_code in {
        f"{case.table.prefix}_RECIPIENT_FIELD_MISSING",
        f"{case.table.prefix}_RECIPIENT_VALUE_INVALID",
    }
    assert stage.sends() == []
