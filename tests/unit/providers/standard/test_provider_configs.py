"""Configuration validation and the credential-derived values of each standard provider."""

from __future__ import annotations

from typing import Any

import pytest

from wepush.agent.engine import RecipientRecord
from wepush.agent.providers.spi import ConfigDocument, ProviderFactory
from wepush.agent.providers.standard import (
    AliyunSmsProviderFactory,
    DingTalkBotProviderFactory,
    FeishuBotProviderFactory,
    SmtpProviderFactory,
    WechatMiniProgramSubscribeProviderFactory,
    WechatMpTemplateProviderFactory,
    WeComAppProviderFactory,
    WeComBotProviderFactory,
)
from wepush.agent.providers.standard._vendor import ConfigError, RenderProblem, openid_of, recipient_fields
from wepush.agent.providers.standard.aliyun_sms import normalise_phone
from wepush.agent.providers.standard.dingtalk_bot._session import access_token_of
from wepush.agent.providers.standard.feishu_bot._config import hook_id_of
from wepush.agent.providers.standard.wecom_app import targets_of
from wepush.agent.providers.standard.wecom_app._config import WeComAppMessage
from wepush.agent.providers.standard.wecom_bot._session import webhook_key_of

SECRET = {"$secret": "s"}
FACTORIES: dict[str, ProviderFactory] = {
    "smtp": SmtpProviderFactory(),
    "feishu": FeishuBotProviderFactory(),
    "dingtalk": DingTalkBotProviderFactory(),
    "wecom-bot": WeComBotProviderFactory(),
    "wecom-app": WeComAppProviderFactory(),
    "aliyun": AliyunSmsProviderFactory(),
    "mp": WechatMpTemplateProviderFactory(),
    "mini": WechatMiniProgramSubscribeProviderFactory(),
}

# (provider, account or message, document, path of the expected issue or None when valid)
CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("smtp", "account", {"host": "smtp.example.test", "fromAddress": "a@example.test"}, None),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "username": "u", "password": SECRET}, None),
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "security": "PLAIN", "allowPlaintext": False},
        "/allowPlaintext",
    ),
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "tlsCaCertificate": "not pem"},
        "/tlsCaCertificate",
    ),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "password": "inline!"}, "/password"),
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "requestTimeout": "PT0S"},
        "/requestTimeout",
    ),
    # A line break in the From name or the AUTH user would fail every send, blamed on each recipient.
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "fromName": "Ops\r\nBcc: x@y.test"},
        "/fromName",
    ),
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "username": "u\n", "password": SECRET},
        "/username",
    ),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "fromName": "运营 Team"}, None),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "fromName": "Ops\tTeam"}, None),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "fromName": "Ops\x00"}, "/fromName"),
    ("smtp", "message", {"subject": "Hi \x1b[31m{{name}}", "textBody": "t"}, "/subject"),
    # An encoded word is decoded into the header's text by the email package, line breaks included.
    (
        "smtp",
        "account",
        {"host": "h", "fromAddress": "a@b.test", "fromName": "=?utf-8?q?Ops=0D=0ABcc=3A_x=40y.test?="},
        "/fromName",
    ),
    ("smtp", "message", {"subject": "=?utf-8?q?Hi=0D=0A?= {{name}}", "textBody": "t"}, "/subject"),
    ("smtp", "message", {"subject": "Is 1+1=2? Yes, {{name}} =)", "textBody": "t"}, None),
    # Schema patterns end at the end of the text (ECMA-262), not before a final line break as Python's ``$``.
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "replyTo": "r@b.test\n"}, "/replyTo"),
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "heloName": "mail.b.test\n"}, "/heloName"),
    ("smtp", "message", {"subject": "s", "htmlBody": "<p>{{x}}</p>"}, None),
    ("smtp", "message", {"subject": "s", "textBody": "t", "toField": "bad field!"}, "/toField"),
    ("feishu", "account", {"webhook": SECRET, "region": "lark", "signingSecret": SECRET}, None),
    ("feishu", "account", {"webhook": "https://open.feishu.cn/open-apis/bot/v2/hook/x"}, "/webhook"),
    ("feishu", "message", {"msgType": "post", "post": {"zh_cn": {"title": "{{t}}", "content": []}}}, None),
    (
        "feishu",
        "message",
        {"msgType": "interactive", "card": {"elements": [{"text": "{{a.b}}"}]}},
        "/card/elements/0/text",
    ),
    (
        "dingtalk",
        "message",
        {"msgType": "actionCard", "title": "t", "text": "x", "singleTitle": "go", "singleUrl": "u"},
        None,
    ),
    ("dingtalk", "message", {"msgType": "text", "content": "x", "atMobiles": ["{{m"]}, "/atMobiles/0"),
    (
        "wecom-bot",
        "message",
        {"msgType": "news", "articles": [{"title": "{{t}}", "url": "https://x.test"}]},
        None,
    ),
    ("wecom-bot", "message", {"msgType": "news", "articles": [{"title": "t"}]}, "/articles/0/url"),
    ("wecom-app", "account", {"corpId": "ww01", "corpSecret": SECRET, "agentId": 0}, "/agentId"),
    (
        "wecom-app",
        "message",
        {"msgType": "textcard", "textcard": {"title": "t", "description": "d", "url": "u"}},
        None,
    ),
    ("aliyun", "account", {"accessKeyId": SECRET, "accessKeySecret": SECRET, "signName": ""}, "/signName"),
    ("aliyun", "message", {"templateCode": "SMS_1", "phoneField": "mobile"}, None),
    ("mp", "message", {"templateId": "t", "data": {"k": {"value": "v", "color": "red"}}}, "/data/k"),
    (
        "mp",
        "message",
        {"templateId": "t", "data": {"k": "v"}, "miniprogram": {"appId": "wx0123456789abcdef"}},
        None,
    ),
    (
        "mini",
        "account",
        {"appId": "wx0123456789abcdef", "appSecret": SECRET, "connectTimeout": "5s"},
        "/connectTimeout",
    ),
    ("mini", "message", {"templateId": "t", "data": {"thing1": "{{x}}"}, "lang": "fr_FR"}, "/lang"),
]


@pytest.mark.parametrize(("provider", "kind", "document", "path"), CASES)
def test_configurations_are_validated_per_field(
    provider: str, kind: str, document: dict[str, Any], path: str | None
) -> None:
    factory = FACTORIES[provider]
    config = ConfigDocument.from_json(f"{provider}/{kind}", "1", document)

    result = factory.validate_account(config) if kind == "account" else factory.validate_message(config)

    if path is None:
        assert result.ok, result.issues
    else:
        assert not result.ok
        assert path in [issue.path for issue in result.issues], result.issues


PASTED = "sk-live-0123456789abcdef"

# (provider, account or message, a document with a secret pasted where a reference or another type belongs)
PASTED_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("smtp", "account", {"host": "h", "fromAddress": "a@b.test", "password": PASTED}),
    ("feishu", "account", {"webhook": PASTED}),
    ("aliyun", "account", {"accessKeyId": SECRET, "accessKeySecret": PASTED, "signName": "s"}),
    ("mini", "account", {"appId": "wx0123456789abcdef", "appSecret": PASTED}),
    ("wecom-app", "account", {"corpId": "ww01", "corpSecret": SECRET, "agentId": PASTED}),
    ("dingtalk", "message", {"msgType": "text", "content": "x", "atMobiles": PASTED}),
]


@pytest.mark.parametrize(("provider", "kind", "document"), PASTED_CASES)
def test_a_schema_violation_names_the_rule_without_quoting_the_value(
    provider: str, kind: str, document: dict[str, Any]
) -> None:
    factory = FACTORIES[provider]
    config = ConfigDocument.from_json(f"{provider}/{kind}", "1", document)

    result = factory.validate_account(config) if kind == "account" else factory.validate_message(config)

    assert not result.ok
    assert result.issues
    for found in result.issues:
        assert PASTED not in found.message
        assert "sk-live" not in found.message


def test_a_document_that_is_not_json_is_refused() -> None:
    result = FACTORIES["feishu"].validate_account(ConfigDocument("a", "1", "application/json", b"{nope"))

    assert [(i.path, i.code) for i in result.issues] == [("", "NOT_JSON")]


@pytest.mark.parametrize(
    ("parse", "value", "expected"),
    [
        (
            lambda v: hook_id_of(v, "open.feishu.cn"),
            "https://open.feishu.cn/open-apis/bot/v2/hook/abcd-1234-ef",
            "abcd-1234-ef",
        ),
        (lambda v: hook_id_of(v, "open.larksuite.com"), "abcd-1234-ef", "abcd-1234-ef"),
        (
            access_token_of,
            "https://oapi.dingtalk.com/robot/send?access_token=0123456789abcdef",
            "0123456789abcdef",
        ),
        (access_token_of, "0123456789abcdef0123", "0123456789abcdef0123"),
        (
            webhook_key_of,
            "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=5f0c9a3e-1b2c",
            "5f0c9a3e-1b2c",
        ),
        (webhook_key_of, "5f0c9a3e-1b2c", "5f0c9a3e-1b2c"),
    ],
)
def test_webhook_secrets_may_be_the_whole_official_url_or_just_the_credential(
    parse: Any, value: str, expected: str
) -> None:
    assert parse(value) == expected


@pytest.mark.parametrize(
    ("parse", "value"),
    [
        (
            lambda v: hook_id_of(v, "open.feishu.cn"),
            "https://open.larksuite.com/open-apis/bot/v2/hook/abcd-1234-ef",
        ),
        (
            lambda v: hook_id_of(v, "open.feishu.cn"),
            "http://open.feishu.cn/open-apis/bot/v2/hook/abcd-1234-ef",
        ),
        (
            lambda v: hook_id_of(v, "open.feishu.cn"),
            "https://evil.example/open-apis/bot/v2/hook/abcd-1234-ef",
        ),
        (access_token_of, "https://oapi.dingtalk.com.evil.example/robot/send?access_token=0123456789abcdef"),
        (access_token_of, "https://oapi.dingtalk.com:8443/robot/send?access_token=0123456789abcdef"),
        (webhook_key_of, "https://127.0.0.1/cgi-bin/webhook/send?key=5f0c9a3e-1b2c"),
        (webhook_key_of, "key with spaces"),
        # A host whose IDNA label does not decode: yarl parses it and fails only when the host is read.
        (
            lambda v: hook_id_of(v, "open.feishu.cn"),
            "https://xn--a.example/open-apis/bot/v2/hook/abcd-1234-ef",
        ),
        (access_token_of, "https://xn--a.example/robot/send?access_token=0123456789abcdef"),
    ],
)
def test_a_webhook_secret_pointing_anywhere_but_the_official_host_is_refused_without_echoing_it(
    parse: Any, value: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(value)

    assert value not in str(raised.value)
    assert "abcd-1234" not in str(raised.value)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("13800138000", "13800138000"),
        ("+86 138-0013-8000", "13800138000"),
        ("8613800138000", "13800138000"),
        ("+852 6123 4567", "85261234567"),
        ("0085261234567", "85261234567"),
        ("0086 138 0013 8000", "13800138000"),
        (13800138000, "13800138000"),
    ],
)
def test_phone_numbers_are_normalised_to_the_vendor_format(raw: object, normalised: str) -> None:
    assert normalise_phone({"phone": raw}, "phone") == normalised


# After country code 86 only a mainland number may follow (QA's 10- and 12-digit "+86…" went out as
# international numbers).
@pytest.mark.parametrize(
    "raw",
    [
        "12800138000",
        "1380013800",
        "abc",
        "+0123456",
        True,
        "",
        "+8613800000",
        "86138000000077",
        "+86138000000077",
        "0086138000000077",
        "+8612800000008",
    ],
)
def test_invalid_phone_numbers_are_refused_as_invalid_recipients(raw: object) -> None:
    with pytest.raises(RenderProblem) as raised:
        normalise_phone({"phone": raw}, "phone")

    assert raised.value.suffix == "RECIPIENT_VALUE_INVALID"


def _wecom_message() -> WeComAppMessage:
    return WeComAppMessage("text", None, None, False, False, 1800, "touser", "toparty", "totag")


def test_wecom_targets_come_from_the_configured_fields() -> None:
    targets = targets_of({"touser": " zhangsan | lisi ", "toparty": "", "totag": "7"}, _wecom_message())

    assert targets == {"touser": "zhangsan|lisi", "totag": "7"}


@pytest.mark.parametrize(
    ("fields", "suffix"),
    [
        ({"name": "x"}, "RECIPIENT_FIELD_MISSING"),
        ({"toparty": "abc"}, "RECIPIENT_VALUE_INVALID"),
        ({"touser": "a b"}, "RECIPIENT_VALUE_INVALID"),
    ],
)
def test_wecom_recipients_without_usable_targets_are_refused(fields: dict[str, str], suffix: str) -> None:
    with pytest.raises(RenderProblem) as raised:
        targets_of(fields, _wecom_message())

    assert raised.value.suffix == suffix


def test_openids_are_checked_before_sending() -> None:
    fields = recipient_fields(RecipientRecord.of("i", 1, {"openid": "oAbc123_-x", "bad": "x y", "n": 5}))

    assert openid_of(fields, "openid") == "oAbc123_-x"
    for field, suffix in (
        ("bad", "RECIPIENT_VALUE_INVALID"),
        ("n", "RECIPIENT_VALUE_INVALID"),
        ("none", "RECIPIENT_FIELD_MISSING"),
    ):
        with pytest.raises(RenderProblem) as raised:
            openid_of(fields, field)
        assert raised.value.suffix == suffix
