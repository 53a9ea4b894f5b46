"""Descriptors, entry points, error tables and their documentation agree."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

import wepush.agent.providers.standard as standard
from wepush.agent.providers.catalog import ProviderCatalog, descriptor_problems
from wepush.agent.providers.spi import ErrorCategory, ThreadSafetyMode
from wepush.agent.providers.standard._vendor import ErrorTable
from wepush.agent.providers.standard.aliyun_sms import ALIYUN_SMS_TABLE
from wepush.agent.providers.standard.dingtalk_bot import DINGTALK_TABLE
from wepush.agent.providers.standard.feishu_bot import FEISHU_TABLE
from wepush.agent.providers.standard.smtp import SMTP_TABLE, reply_row
from wepush.agent.providers.standard.wechat_miniprogram import WECHAT_MINIPROGRAM_TABLE
from wepush.agent.providers.standard.wechat_mp import WECHAT_MP_TABLE
from wepush.agent.providers.standard.wecom_app import WECOM_APP_TABLE
from wepush.agent.providers.standard.wecom_bot import WECOM_BOT_TABLE

C = ErrorCategory
DOCS = Path(__file__).resolve().parents[4] / "docs" / "providers.md"
EXPECTED = {
    "wepush.smtp": ("SmtpProviderFactory", SMTP_TABLE, ThreadSafetyMode.SESSION_PER_WORKER),
    "wepush.feishu-bot": ("FeishuBotProviderFactory", FEISHU_TABLE, ThreadSafetyMode.THREAD_SAFE),
    "wepush.dingtalk-bot": ("DingTalkBotProviderFactory", DINGTALK_TABLE, ThreadSafetyMode.THREAD_SAFE),
    "wepush.wecom-bot": ("WeComBotProviderFactory", WECOM_BOT_TABLE, ThreadSafetyMode.THREAD_SAFE),
    "wepush.wecom-app": ("WeComAppProviderFactory", WECOM_APP_TABLE, ThreadSafetyMode.THREAD_SAFE),
    "wepush.aliyun-sms": ("AliyunSmsProviderFactory", ALIYUN_SMS_TABLE, ThreadSafetyMode.THREAD_SAFE),
    "wepush.wechat-mp-template": (
        "WechatMpTemplateProviderFactory",
        WECHAT_MP_TABLE,
        ThreadSafetyMode.THREAD_SAFE,
    ),
    "wepush.wechat-miniprogram-subscribe": (
        "WechatMiniProgramSubscribeProviderFactory",
        WECHAT_MINIPROGRAM_TABLE,
        ThreadSafetyMode.THREAD_SAFE,
    ),
}


def test_the_package_exports_exactly_the_eight_factories() -> None:
    assert sorted(standard.__all__) == sorted(name for name, _, _ in EXPECTED.values())


@pytest.mark.parametrize("provider_id", EXPECTED)
def test_each_provider_is_an_installed_entry_point_with_a_sound_descriptor(provider_id: str) -> None:
    class_name, _, mode = EXPECTED[provider_id]
    [point] = [p for p in entry_points(group="wepush.providers") if p.name == provider_id]
    factory = point.load()()
    descriptor = factory.descriptor()

    assert type(factory).__name__ == class_name
    assert descriptor.provider_id == provider_id
    assert descriptor_problems(descriptor) == []
    assert descriptor.thread_safety is mode
    assert descriptor.concurrency_limit is not None
    assert descriptor.capabilities.preview
    assert descriptor.capabilities.dry_run
    assert ProviderCatalog.from_entry_points().get(provider_id) is not None


@pytest.mark.parametrize("provider_id", EXPECTED)
def test_secret_fields_are_marked_and_credentials_never_have_defaults(provider_id: str) -> None:
    class_name, _, _ = EXPECTED[provider_id]
    schema = getattr(standard, class_name)().descriptor().schemas.account
    secret_fields = [name for name, prop in schema["properties"].items() if prop.get("x-wepush-secret")]

    assert secret_fields
    for name in secret_fields:
        assert schema["properties"][name]["$ref"] == "#/$defs/secretRef"
        assert "default" not in schema["properties"][name]


@pytest.mark.parametrize("provider_id", EXPECTED)
def test_each_error_table_is_documented_verbatim(provider_id: str) -> None:
    _, table, _ = EXPECTED[provider_id]

    assert table.markdown() in DOCS.read_text(encoding="utf-8"), (
        f"docs/providers.md is stale for {provider_id}"
    )


@pytest.mark.parametrize("provider_id", EXPECTED)
def test_each_table_offers_every_outcome_a_run_needs(provider_id: str) -> None:
    _, table, _ = EXPECTED[provider_id]
    prefix = table.prefix

    assert isinstance(table, ErrorTable)
    assert {C.NETWORK, C.TIMEOUT, C.CANCELLED, C.INTERNAL, C.RECIPIENT_INVALID} <= table.categories
    assert table[f"{prefix}_CANCELLED"].retryable is False
    assert all(row.code.startswith(prefix + "_") for row in table.rows)


@pytest.mark.parametrize(
    ("stage", "code", "text", "expected"),
    [
        ("RCPT", 550, "5.1.1 No such user", "SMTP_RECIPIENT_REJECTED"),
        ("RCPT", 551, "User not local", "SMTP_RECIPIENT_REJECTED"),
        ("RCPT", 554, "5.1.0 Address rejected", "SMTP_RECIPIENT_REJECTED"),
        ("RCPT", 550, "5.7.1 Relaying denied", "SMTP_RELAY_DENIED"),
        ("RCPT", 421, "4.7.0 Try later", "SMTP_THROTTLED"),
        ("MAIL", 454, "4.7.0 TLS not available", "SMTP_THROTTLED"),
        ("AUTH", 535, "5.7.8 Authentication credentials invalid", "SMTP_AUTH_FAILED"),
        ("AUTH", 530, "5.7.0 Authentication required", "SMTP_AUTH_FAILED"),
        ("MAIL", 553, "5.1.8 Sender rejected", "SMTP_SENDER_REJECTED"),
        ("MAIL", 451, "4.3.0 Try again", "SMTP_TEMPORARY_FAILURE"),
        ("DATA", 552, "5.3.4 Too big", "SMTP_PERMANENT_FAILURE"),
        ("GREETING", 554, "No service", "SMTP_PERMANENT_FAILURE"),
        ("DATA", 399, "Odd", "SMTP_OUTCOME_UNKNOWN"),
    ],
)
def test_smtp_replies_are_classified_by_stage_and_code(
    stage: str, code: int, text: str, expected: str
) -> None:
    assert reply_row(stage, code, text).code == expected
