"""One row per HTTP vendor: configs, secrets, the vendor's answers and what it checks on each request.

Signatures are recomputed here from the vendors' published rules, independently
of the provider code, so a test fails if the provider signs differently from
what the vendor would verify.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote_plus

from wepush.agent.engine import MappingSecretResolver, RecipientRecord
from wepush.agent.providers.spi import ConfigDocument, ErrorCategory, ProviderFactory, SecretRef
from wepush.agent.providers.standard import (
    AliyunSmsProviderFactory,
    DingTalkBotProviderFactory,
    FeishuBotProviderFactory,
    WechatMiniProgramSubscribeProviderFactory,
    WechatMpTemplateProviderFactory,
    WeComAppProviderFactory,
    WeComBotProviderFactory,
)
from wepush.agent.providers.standard._vendor import ErrorTable
from wepush.agent.providers.standard.aliyun_sms import ALIYUN_SMS_TABLE
from wepush.agent.providers.standard.dingtalk_bot import DINGTALK_TABLE
from wepush.agent.providers.standard.feishu_bot import FEISHU_TABLE
from wepush.agent.providers.standard.wechat_miniprogram import WECHAT_MINIPROGRAM_TABLE
from wepush.agent.providers.standard.wechat_mp import WECHAT_MP_TABLE
from wepush.agent.providers.standard.wecom_app import WECOM_APP_TABLE
from wepush.agent.providers.standard.wecom_bot import WECOM_BOT_TABLE
from wepush.agent.providers.testing import RecordedRequest, ScriptedResponse

C = ErrorCategory

# ---------------------------------------------------------------- test credentials (never real)
FEISHU_HOOK = "0f1e2d3c-test-hook-9a8b"
FEISHU_WEBHOOK = f"https://open.feishu.cn/open-apis/bot/v2/hook/{FEISHU_HOOK}"
FEISHU_SECRET = "feishu-sign-secret-Q1w2"
DINGTALK_TOKEN = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"
DINGTALK_SECRET = "SECtest0123456789abcdefTEST"
WECOM_KEY = "5f0c9a3e-1b2c-4d5e-8f90-a1b2c3d4e5f6"
WECOM_CORP_SECRET = "wecom-corp-secret-Zx9Qp"
ALIYUN_KEY_ID = "LTAI5tTestKeyId0001"
ALIYUN_KEY_SECRET = "test-access-key-secret-9f8e"
WECHAT_SECRET = "wechat-app-secret-77aa11"
WECHAT_APP_ID = "wx0123456789abcdef"


def recipient_values(n: int) -> dict[str, Any]:
    """A recipient every provider can send to (each uses the fields it needs)."""
    return {
        "name": f'User {n} "quoted" <b>',
        "mobile": f"1380013{n % 10000:04d}",
        "phone": f"1390013{n % 10000:04d}",
        "openid": f"oUser{n:06d}Abc",
        "touser": f"user{n}|ops",
        "email": f"user{n}@example.test",
        "code": f"{n % 1000000:06d}",
    }


@dataclass(frozen=True)
class HttpCase:
    """Everything the shared harness needs to drive one HTTP vendor provider."""

    provider_id: str
    make_factory: Callable[[str | None], ProviderFactory]
    table: ErrorTable
    account_json: Mapping[str, Any]
    message_json: Mapping[str, Any]
    secrets: Mapping[str, str]
    send_path: str
    official_origin: str
    success: Callable[[RecordedRequest], ScriptedResponse]
    error_answer: Callable[[str, str], ScriptedResponse]
    verify: Callable[[RecordedRequest, dict[str, Any]], None]
    token_path: str | None = None
    token_query: Mapping[str, str] = field(default_factory=dict)
    expired_code: str = "42001"
    bad_recipient: Mapping[str, Any] = field(default_factory=lambda: {"unrelated": "x"})
    invalid_accounts: tuple[tuple[Mapping[str, Any], str], ...] = ()
    invalid_messages: tuple[tuple[Mapping[str, Any], str], ...] = ()
    secret_in_path: bool = False
    volatile_keys: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.provider_id

    def account(self, **overrides: Any) -> ConfigDocument:
        return ConfigDocument.from_json(
            f"{self.provider_id}/account", "1", {**self.account_json, **overrides}
        )

    def message(self, **overrides: Any) -> ConfigDocument:
        return ConfigDocument.from_json(
            f"{self.provider_id}/message", "1", {**self.message_json, **overrides}
        )

    def resolver(self) -> MappingSecretResolver:
        return MappingSecretResolver(
            {SecretRef("default", name): value for name, value in self.secrets.items()}
        )

    def recipient(self, n: int) -> RecipientRecord:
        return RecipientRecord.of(f"item-{n}", n, recipient_values(n))

    def vendor_codes(self) -> list[tuple[str, str, ErrorCategory]]:
        """Every vendor code in the table with the provider code and category it must produce."""
        return [(v, row.code, row.category) for row in self.table.rows for v in row.vendor_codes]


def _ref(name: str) -> dict[str, str]:
    return {"$secret": name}


def _errcode(code: str, message: str) -> ScriptedResponse:
    return ScriptedResponse(200, json={"errcode": int(code.split(":")[0]), "errmsg": message})


def _near_now(seconds: float) -> None:
    assert abs(seconds - time.time()) < 120, "the signed timestamp is not the current time"


# ---------------------------------------------------------------- Feishu


def _feishu_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", f"/open-apis/bot/v2/hook/{FEISHU_HOOK}")
    assert request.headers["Content-Type"].startswith("application/json")
    body = request.json()
    assert isinstance(body, dict)
    timestamp = body["timestamp"]
    _near_now(int(timestamp))
    key = f"{timestamp}\n{FEISHU_SECRET}".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    assert body["msg_type"] == "text"
    assert body["content"] == {"text": f"Hello {values['name']}, code {values['code']}"}


FEISHU = HttpCase(
    provider_id="wepush.feishu-bot",
    make_factory=lambda override: FeishuBotProviderFactory(endpoint_override=override),
    table=FEISHU_TABLE,
    account_json={
        "webhook": _ref("feishu-webhook"),
        "signingSecret": _ref("feishu-sign"),
        "requestTimeout": "PT5S",
    },
    message_json={"msgType": "text", "text": "Hello {{name}}, code {{code}}"},
    secrets={"feishu-webhook": FEISHU_WEBHOOK, "feishu-sign": FEISHU_SECRET},
    send_path=f"/open-apis/bot/v2/hook/{FEISHU_HOOK}",
    official_origin="https://open.feishu.cn",
    success=lambda r: ScriptedResponse(200, json={"code": 0, "msg": "success", "data": {}}),
    error_answer=lambda code, msg: ScriptedResponse(200, json={"code": int(code), "msg": msg, "data": {}}),
    verify=_feishu_verify,
    invalid_accounts=(({"webhook": _ref("w"), "region": "mars"}, "/region"), ({}, "/webhook")),
    invalid_messages=(
        ({"msgType": "interactive"}, "/card"),
        ({"msgType": "text", "text": "{{a.b}}"}, "/text"),
    ),
    secret_in_path=True,
    volatile_keys=("timestamp", "sign"),
)

# ---------------------------------------------------------------- DingTalk

_DINGTALK_MESSAGES = {
    "310000:sign": "sign not match, more: [https://ding-doc.dingtalk.com/doc#/serverapi2/qf2nxq]",
    "310000:ip": "ip 203.0.113.9 not in whitelist",
    "310000:keyword": "keywords not in content",
    "310000": "description:机器人安全设置校验失败;solution:检查机器人安全设置",
}


def _dingtalk_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", "/robot/send")
    assert request.query["access_token"] == DINGTALK_TOKEN
    timestamp = request.query["timestamp"]
    _near_now(int(timestamp) / 1000)
    message = f"{timestamp}\n{DINGTALK_SECRET}".encode()
    expected = base64.b64encode(hmac.new(DINGTALK_SECRET.encode(), message, hashlib.sha256).digest()).decode()
    # The query arrives decoded: a '+' or '/' of the base64 survived only if the provider URL-encoded it.
    assert request.query["sign"] == expected
    body = request.json()
    assert body == {
        "msgtype": "text",
        "text": {"content": f"Hi {values['name']}"},
        "at": {"atMobiles": [values["mobile"]], "atUserIds": [], "isAtAll": False},
    }


DINGTALK = HttpCase(
    provider_id="wepush.dingtalk-bot",
    make_factory=lambda override: DingTalkBotProviderFactory(endpoint_override=override),
    table=DINGTALK_TABLE,
    account_json={
        "accessToken": _ref("ding-token"),
        "signingSecret": _ref("ding-sign"),
        "requestTimeout": "PT5S",
    },
    message_json={"msgType": "text", "content": "Hi {{name}}", "atMobiles": ["{{mobile}}"]},
    secrets={
        "ding-token": f"https://oapi.dingtalk.com/robot/send?access_token={DINGTALK_TOKEN}",
        "ding-sign": DINGTALK_SECRET,
    },
    send_path="/robot/send",
    official_origin="https://oapi.dingtalk.com",
    success=lambda r: ScriptedResponse(200, json={"errcode": 0, "errmsg": "ok"}),
    error_answer=lambda code, msg: _errcode(code, _DINGTALK_MESSAGES.get(code, msg)),
    verify=_dingtalk_verify,
    bad_recipient={"name": "x", "mobile": "not-a-phone"},
    invalid_accounts=(({"signingSecret": _ref("s")}, "/accessToken"),),
    invalid_messages=(
        ({"msgType": "markdown", "title": "t"}, "/text"),
        ({"msgType": "actionCard", "title": "t", "text": "x"}, "/buttons"),
    ),
)

# ---------------------------------------------------------------- WeCom bot


def _wecom_bot_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", "/cgi-bin/webhook/send")
    assert dict(request.query) == {"key": WECOM_KEY}
    assert request.json() == {
        "msgtype": "text",
        "text": {"content": f"Dear {values['name']}", "mentioned_mobile_list": [values["mobile"]]},
    }


WECOM_BOT = HttpCase(
    provider_id="wepush.wecom-bot",
    make_factory=lambda override: WeComBotProviderFactory(endpoint_override=override),
    table=WECOM_BOT_TABLE,
    account_json={"webhookKey": _ref("wecom-key"), "requestTimeout": "PT5S"},
    message_json={"msgType": "text", "content": "Dear {{name}}", "mentionedMobileList": ["{{mobile}}"]},
    secrets={"wecom-key": WECOM_KEY},
    send_path="/cgi-bin/webhook/send",
    official_origin="https://qyapi.weixin.qq.com",
    success=lambda r: ScriptedResponse(200, json={"errcode": 0, "errmsg": "ok"}),
    error_answer=_errcode,
    verify=_wecom_bot_verify,
    invalid_accounts=(({}, "/webhookKey"),),
    invalid_messages=(
        ({"msgType": "news"}, "/articles"),
        ({"msgType": "markdown", "content": "x", "mentionedList": ["a"]}, "/mentionedList"),
    ),
)

# ---------------------------------------------------------------- WeCom application


def _wecom_app_success(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse(200, json={"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": "msg-001"})


def _wecom_app_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", "/cgi-bin/message/send")
    assert request.query["access_token"].startswith("TOKEN-")
    assert request.json() == {
        "touser": values["touser"],
        "msgtype": "text",
        "agentid": 1000002,
        "text": {"content": f"Notice for {values['name']}"},
        "safe": 0,
        "enable_duplicate_check": 0,
        "duplicate_check_interval": 1800,
    }


WECOM_APP = HttpCase(
    provider_id="wepush.wecom-app",
    make_factory=lambda override: WeComAppProviderFactory(endpoint_override=override),
    table=WECOM_APP_TABLE,
    account_json={
        "corpId": "ww0123456789abcd",
        "corpSecret": _ref("wecom-corp"),
        "agentId": 1000002,
        "requestTimeout": "PT5S",
    },
    message_json={"msgType": "text", "content": "Notice for {{name}}"},
    secrets={"wecom-corp": WECOM_CORP_SECRET},
    send_path="/cgi-bin/message/send",
    official_origin="https://qyapi.weixin.qq.com",
    success=_wecom_app_success,
    error_answer=_errcode,
    verify=_wecom_app_verify,
    token_path="/cgi-bin/gettoken",
    token_query={"corpid": "ww0123456789abcd", "corpsecret": WECOM_CORP_SECRET},
    bad_recipient={"name": "x", "touser": "bad user!"},
    invalid_accounts=(
        ({"corpId": "ww1", "corpSecret": _ref("s")}, "/agentId"),
        ({"corpId": "ww1", "agentId": 1}, "/corpSecret"),
    ),
    invalid_messages=(
        ({"msgType": "textcard"}, "/textcard"),
        ({"msgType": "text", "content": "{{x y}}"}, "/content"),
    ),
)

# ---------------------------------------------------------------- Aliyun SMS


def _aliyun_encode(value: str) -> str:
    # Alibaba Cloud's sample implementation of the V3 canonical encoding.
    return quote_plus(value).replace("+", "%20").replace("*", "%2A").replace("%7E", "~")


def aliyun_verify_signature(request: RecordedRequest, action: str) -> dict[str, str]:
    headers = {k.lower(): v for k, v in request.headers.items()}
    match = re.fullmatch(
        r"ACS3-HMAC-SHA256 Credential=([^,]+),SignedHeaders=([^,]+),Signature=([0-9a-f]{64})",
        headers["authorization"],
    )
    assert match is not None, "Authorization is not an ACS3-HMAC-SHA256 header"
    credential, signed, signature = match.groups()
    names = signed.split(";")
    assert credential == ALIYUN_KEY_ID
    assert names == sorted(names)
    required = {
        "host",
        "x-acs-action",
        "x-acs-content-sha256",
        "x-acs-date",
        "x-acs-signature-nonce",
        "x-acs-version",
    }
    assert required <= set(names)
    assert all(n in required or n == "content-type" for n in names)
    payload_hash = hashlib.sha256(request.body).hexdigest()
    assert headers["x-acs-content-sha256"] == payload_hash
    assert (headers["x-acs-action"], headers["x-acs-version"]) == (action, "2017-05-25")
    date = datetime.strptime(headers["x-acs-date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    _near_now(date.timestamp())
    assert len(headers["x-acs-signature-nonce"]) >= 16
    query = "&".join(f"{_aliyun_encode(k)}={_aliyun_encode(v)}" for k, v in sorted(request.query.items()))
    canonical_headers = "".join(f"{n}:{headers[n].strip()}\n" for n in names)
    canonical = f"{request.method}\n{request.path}\n{query}\n{canonical_headers}\n{signed}\n{payload_hash}"
    to_sign = "ACS3-HMAC-SHA256\n" + hashlib.sha256(canonical.encode()).hexdigest()
    expected = hmac.new(ALIYUN_KEY_SECRET.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    assert signature == expected, "the vendor would answer SignatureDoesNotMatch"
    return headers


def _aliyun_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path, request.body) == ("POST", "/", b"")
    aliyun_verify_signature(request, "SendSms")
    query = dict(request.query)
    assert json.loads(query.pop("TemplateParam")) == {"code": values["code"], "name": values["name"]}
    assert query == {
        "PhoneNumbers": values["phone"],
        "SignName": "WePush测试",
        "TemplateCode": "SMS_123456789",
        "OutId": query["OutId"],  # the item id, checked below
    }
    assert query["OutId"].startswith("item-")


def _aliyun_success(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse(
        200,
        json={"Code": "OK", "Message": "OK", "BizId": "900619746936498440^0", "RequestId": "F655A8D5-B967"},
    )


def _aliyun_error(code: str, message: str) -> ScriptedResponse:
    # Gateway errors come with a 4xx status, business (isv./isp.) errors with 200.
    status = 200 if code.startswith(("isv.", "isp.")) else (503 if code == "ServiceUnavailable" else 400)
    return ScriptedResponse(status, json={"Code": code, "Message": message, "RequestId": "req-err"})


ALIYUN_SMS = HttpCase(
    provider_id="wepush.aliyun-sms",
    make_factory=lambda override: AliyunSmsProviderFactory(endpoint_override=override),
    table=ALIYUN_SMS_TABLE,
    account_json={
        "accessKeyId": _ref("ali-id"),
        "accessKeySecret": _ref("ali-secret"),
        "signName": "WePush测试",
        "requestTimeout": "PT5S",
    },
    message_json={
        "templateCode": "SMS_123456789",
        "templateParams": {"code": "{{code}}", "name": "{{name}}"},
    },
    secrets={"ali-id": ALIYUN_KEY_ID, "ali-secret": ALIYUN_KEY_SECRET},
    send_path="/",
    official_origin="https://dysmsapi.aliyuncs.com",
    success=_aliyun_success,
    error_answer=_aliyun_error,
    verify=_aliyun_verify,
    bad_recipient={"name": "x", "code": "1", "phone": "12345"},
    invalid_accounts=(({"accessKeyId": _ref("a"), "accessKeySecret": _ref("b")}, "/signName"),),
    invalid_messages=(
        ({"templateCode": "123"}, "/templateCode"),
        ({"templateCode": "SMS_1", "templateParams": {"a": "{{"}}, "/templateParams/a"),
    ),
)

# ---------------------------------------------------------------- WeChat


def _wechat_success(request: RecordedRequest) -> ScriptedResponse:
    return ScriptedResponse(200, json={"errcode": 0, "errmsg": "ok", "msgid": 200228332})


def _wechat_mp_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", "/cgi-bin/message/template/send")
    assert request.query["access_token"].startswith("TOKEN-")
    body = request.json()
    assert isinstance(body, dict)
    assert re.fullmatch(r"[0-9a-f]{32}", body.pop("client_msg_id"))
    assert body == {
        "touser": values["openid"],
        "template_id": "tmpl-Order_Shipped",
        "url": f"https://shop.example.test/orders/{values['code']}",
        "data": {
            "first": {"value": f"Hello {values['name']}"},
            "keyword1": {"value": values["code"], "color": "#173177"},
        },
    }


WECHAT_MP = HttpCase(
    provider_id="wepush.wechat-mp-template",
    make_factory=lambda override: WechatMpTemplateProviderFactory(endpoint_override=override),
    table=WECHAT_MP_TABLE,
    account_json={"appId": WECHAT_APP_ID, "appSecret": _ref("wx-secret"), "requestTimeout": "PT5S"},
    message_json={
        "templateId": "tmpl-Order_Shipped",
        "url": "https://shop.example.test/orders/{{code}}",
        "data": {"first": "Hello {{name}}", "keyword1": {"value": "{{code}}", "color": "#173177"}},
    },
    secrets={"wx-secret": WECHAT_SECRET},
    send_path="/cgi-bin/message/template/send",
    official_origin="https://api.weixin.qq.com",
    success=_wechat_success,
    error_answer=_errcode,
    verify=_wechat_mp_verify,
    token_path="/cgi-bin/token",
    token_query={"grant_type": "client_credential", "appid": WECHAT_APP_ID, "secret": WECHAT_SECRET},
    bad_recipient={"name": "x", "openid": "no spaces allowed"},
    invalid_accounts=(({"appId": "not-an-app", "appSecret": _ref("s")}, "/appId"),),
    invalid_messages=(
        ({"templateId": "t"}, "/data"),
        ({"templateId": "t", "data": {"k": "{{}}"}}, "/data/k"),
    ),
    volatile_keys=("client_msg_id",),
)


def _wechat_mini_verify(request: RecordedRequest, values: dict[str, Any]) -> None:
    assert (request.method, request.path) == ("POST", "/cgi-bin/message/subscribe/send")
    assert request.query["access_token"].startswith("TOKEN-")
    assert request.json() == {
        "touser": values["openid"],
        "template_id": "tmplSubscribe01",
        "page": f"pages/order?id={values['code']}",
        "miniprogram_state": "trial",
        "lang": "en_US",
        "data": {"thing1": {"value": values["name"]}, "number2": {"value": values["code"]}},
    }


WECHAT_MINIPROGRAM = HttpCase(
    provider_id="wepush.wechat-miniprogram-subscribe",
    make_factory=lambda override: WechatMiniProgramSubscribeProviderFactory(endpoint_override=override),
    table=WECHAT_MINIPROGRAM_TABLE,
    account_json={"appId": WECHAT_APP_ID, "appSecret": _ref("wx-secret"), "requestTimeout": "PT5S"},
    message_json={
        "templateId": "tmplSubscribe01",
        "page": "pages/order?id={{code}}",
        "miniprogramState": "trial",
        "lang": "en_US",
        "data": {"thing1": "{{name}}", "number2": "{{code}}"},
    },
    secrets={"wx-secret": WECHAT_SECRET},
    send_path="/cgi-bin/message/subscribe/send",
    official_origin="https://api.weixin.qq.com",
    success=_wechat_success,
    error_answer=_errcode,
    verify=_wechat_mini_verify,
    token_path="/cgi-bin/token",
    token_query={"grant_type": "client_credential", "appid": WECHAT_APP_ID, "secret": WECHAT_SECRET},
    bad_recipient={"name": "x", "code": "1"},
    invalid_accounts=(({"appId": WECHAT_APP_ID}, "/appSecret"),),
    invalid_messages=(
        ({"templateId": "t", "data": {"a": {"value": "x", "color": "#000000"}}}, "/data"),
        ({"templateId": "t", "data": {"a": "x"}, "miniprogramState": "beta"}, "/miniprogramState"),
    ),
)

HTTP_CASES: tuple[HttpCase, ...] = (
    FEISHU,
    DINGTALK,
    WECOM_BOT,
    WECOM_APP,
    ALIYUN_SMS,
    WECHAT_MP,
    WECHAT_MINIPROGRAM,
)
TOKEN_CASES: tuple[HttpCase, ...] = tuple(case for case in HTTP_CASES if case.token_path is not None)
