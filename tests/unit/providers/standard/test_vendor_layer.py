"""The shared vendor layer: pinned endpoints, credentials, error tables, reply judgement, fallbacks."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from yarl import URL

from wepush.agent.engine import MappingSecretResolver, RecipientRecord, SystemClock
from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ErrorCategory,
    ProviderSendRequest,
    SecretRef,
)
from wepush.agent.providers.standard import FeishuBotProviderFactory
from wepush.agent.providers.standard._vendor import (
    Credentials,
    ErrorTable,
    HttpSettings,
    OutboundRequest,
    Rendered,
    Template,
    VendorHttp,
    VendorReply,
    VendorResponse,
    host_header,
    judge,
    loopback_override,
    row,
    transport_rows,
)
from wepush.agent.providers.standard.feishu_bot import FEISHU_TABLE, FeishuBotSession
from wepush.agent.providers.standard.feishu_bot._config import FeishuMessage

C = ErrorCategory
TABLE = ErrorTable("X", (*transport_rows("X"), row("X_LIMIT", C.RATE_LIMITED, "limit", "45009")))


@pytest.mark.parametrize(
    "value", ["http://127.0.0.1:8080", "http://[::1]:9", "https://localhost:4443", "http://127.0.0.2:1/"]
)
def test_a_loopback_override_is_accepted(value: str) -> None:
    assert loopback_override(value) is not None


@pytest.mark.parametrize(
    "value",
    [
        "https://open.feishu.cn",
        "http://10.0.0.1:80",
        "http://169.254.169.254",
        "http://127.0.0.1:80/api",
        "http://127.0.0.1:80/?x=1",
        "http://user:pw@127.0.0.1:80",
        "ftp://127.0.0.1",
    ],
)
def test_anything_but_a_bare_loopback_origin_is_refused_as_an_override(value: str) -> None:
    with pytest.raises(ValueError, match="endpoint_override"):
        loopback_override(value)


def test_factories_refuse_a_non_loopback_override() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FeishuBotProviderFactory(endpoint_override="https://attacker.example")


@pytest.mark.parametrize(
    ("url", "header"),
    [
        ("https://dysmsapi.aliyuncs.com/", "dysmsapi.aliyuncs.com"),
        ("http://127.0.0.1:8081/", "127.0.0.1:8081"),
        ("http://[::1]:9/", "[::1]:9"),
        ("https://example.test:443/", "example.test"),
    ],
)
def test_the_host_header_carries_a_port_only_when_it_is_not_the_default(url: str, header: str) -> None:
    assert host_header(URL(url)) == header


async def test_credentials_are_read_once_masked_and_forgotten() -> None:
    resolver = MappingSecretResolver(
        {SecretRef("default", "a"): "s3cr3t-value", SecretRef("default", "b"): "s3cr3t"}
    )
    credentials = await Credentials.resolve(
        resolver, {"a": SecretRef("default", "a"), "b": SecretRef("default", "b"), "none": None}
    )
    credentials.remember("issued-token-1")

    masked = credentials.mask("x s3cr3t-value y s3cr3t z issued-token-1")
    text = repr(credentials)
    credentials.forget()

    assert masked == "x ****** y ****** z ******"
    assert text == "Credentials(['a', 'b'])"
    assert credentials.optional("a") is None


def test_an_error_table_refuses_duplicate_codes() -> None:
    with pytest.raises(ValueError, match="mapped twice"):
        ErrorTable("Y", (row("Y_A", C.RATE_LIMITED, "a", "1"), row("Y_B", C.INVALID_REQUEST, "b", "1")))
    with pytest.raises(ValueError, match="duplicate provider code"):
        ErrorTable("Y", (row("Y_A", C.RATE_LIMITED, "a"), row("Y_A", C.INVALID_REQUEST, "b")))


def test_retry_advice_follows_the_category_unless_stated() -> None:
    assert TABLE["X_LIMIT"].retryable
    assert TABLE.local("CONNECT_FAILED").retryable
    assert not TABLE.local("CONNECTION_LOST").retryable
    assert not TABLE.local("TIMEOUT").retryable
    assert ErrorTable("Z", transport_rows("Z", timeout_retryable=True)).local("TIMEOUT").retryable


def _response(status: int, body: Any, headers: dict[str, str] | None = None) -> VendorResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return VendorResponse(status, headers or {}, raw, False)


@pytest.mark.parametrize(
    ("response", "reply", "code", "category"),
    [
        (_response(200, {}), VendorReply("0", True, "ok", "m-1"), "OK", None),
        (_response(200, {}), VendorReply("45009", False, "freq"), "X_LIMIT", C.RATE_LIMITED),
        (_response(200, {}), VendorReply("77777", False, "new code"), "X_VENDOR_ERROR", C.PERMANENT_REMOTE),
        (
            _response(500, {}),
            VendorReply("77777", False, "new code"),
            "X_HTTP_SERVER_ERROR",
            C.TEMPORARY_REMOTE,
        ),
        (_response(200, b"<html>"), None, "X_RESPONSE_UNREADABLE", C.UNKNOWN),
        (_response(429, b"", {"Retry-After": "12"}), None, "X_HTTP_RATE_LIMITED", C.RATE_LIMITED),
        (_response(401, b""), None, "X_HTTP_UNAUTHORIZED", C.AUTHENTICATION),
    ],
)
def test_vendor_answers_are_judged_by_code_then_status(
    response: VendorResponse, reply: VendorReply | None, code: str, category: ErrorCategory | None
) -> None:
    result = judge(response, reply, TABLE, vendor="X", mask=lambda t: t)

    assert (result.provider_code, result.category) == (code, category)
    if code == "X_HTTP_RATE_LIMITED":
        assert result.retry_after == timedelta(seconds=12)
    if code == "OK":
        assert result.external_request_id == "m-1"


async def test_a_transport_bug_is_an_internal_error_that_names_only_the_origin() -> None:
    http = VendorHttp(HttpSettings(timedelta(seconds=1), timedelta(seconds=1), 1), TABLE, SystemClock())
    try:
        result = http.classify(RuntimeError("https://h/?access_token=SECRET"), "https://h")
    finally:
        await http.close()

    assert (result.category, result.provider_code) == (C.INTERNAL, "X_INTERNAL_ERROR")
    assert "SECRET" not in (result.diagnostic or "")


class ExplodingSession(FeishuBotSession):
    def outbound(
        self,
        rendered: Rendered,
        request: ProviderSendRequest,
        *,
        reveal: bool,
        access_token: str | None = None,
    ) -> OutboundRequest:
        raise RuntimeError(f"bug near {FEISHU_HOOK}")


FEISHU_HOOK = "hook-id-0123456789"


async def test_an_unexpected_error_in_a_session_is_an_internal_result_without_secrets() -> None:
    http = VendorHttp(
        HttpSettings(timedelta(seconds=1), timedelta(seconds=1), 1), FEISHU_TABLE, SystemClock()
    )
    session = ExplodingSession(
        base=URL("https://open.feishu.cn"),
        hook_id=FEISHU_HOOK,
        message=FeishuMessage("text", Template.parse("hi"), None),
        http=http,
        credentials=Credentials({"webhook": FEISHU_HOOK}),
        clock=SystemClock(),
    )
    record = RecipientRecord.of("i", 1, {})
    try:
        message = ConfigDocument.from_json("m", "1", {"msgType": "text", "text": "hi"})
        request = ProviderSendRequest("r", "i", 1, record, message, "k", None)
        result = await session.send(request, CancellationToken())
    finally:
        await session.close()
        await session.close()

    assert (result.category, result.provider_code) == (C.INTERNAL, "FEISHU_INTERNAL_ERROR")
    assert FEISHU_HOOK not in (result.diagnostic or "")
    assert http.calls == 0


def test_wire_requests_and_answers_never_show_credentials_in_their_repr() -> None:
    request = OutboundRequest(
        "POST",
        URL("https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=TOK-1"),
        {"Authorization": "SIG-1"},
    )
    answer = VendorResponse(200, {}, b'{"echo": "TOK-1"}', False)

    shown = repr(request) + repr(answer)

    assert "TOK-1" not in shown
    assert "SIG-1" not in shown
    assert "https://qyapi.weixin.qq.com" in shown
