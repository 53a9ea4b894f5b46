"""Request signing per the vendors' published rules."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest

from wepush.agent.providers.standard.aliyun_sms import canonical_query, sign_call
from wepush.agent.providers.standard.dingtalk_bot import dingtalk_sign, security_cause
from wepush.agent.providers.standard.feishu_bot import feishu_sign


def test_aliyun_v3_signature_matches_the_vendors_published_example() -> None:
    # The worked example of Alibaba Cloud's "V3 request signature" documentation (RunInstances).
    signed = sign_call(
        method="POST",
        host="ecs.cn-shanghai.aliyuncs.com",
        action="RunInstances",
        version="2014-05-26",
        params=[
            ("ImageId", "win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd"),
            ("RegionId", "cn-shanghai"),
        ],
        access_key_id="YourAccessKeyId",
        access_key_secret="YourAccessKeySecret",
        now=datetime(2023, 10, 26, 10, 22, 32, tzinfo=UTC),
        nonce="3156853299f313e23d1673dc12e1703d",
    )

    assert signed.signature == "06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
    assert signed.headers["Authorization"] == (
        "ACS3-HMAC-SHA256 Credential=YourAccessKeyId,"
        "SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version,"
        "Signature=06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
    )
    assert signed.headers["x-acs-content-sha256"] == hashlib.sha256(b"").hexdigest()
    assert "YourAccessKeySecret" not in repr(signed)


def test_aliyun_canonical_query_is_sorted_and_rfc3986_encoded() -> None:
    query = canonical_query(
        [("TemplateParam", '{"a":"b c*~"}'), ("PhoneNumbers", "13800138000"), ("SignName", "测试")]
    )

    assert query == (
        "PhoneNumbers=13800138000&SignName=%E6%B5%8B%E8%AF%95&TemplateParam=%7B%22a%22%3A%22b%20c%2A~%22%7D"
    )


def test_feishu_signature_keys_hmac_with_timestamp_and_secret_over_an_empty_message() -> None:
    expected = base64.b64encode(hmac.new(b"1700000000\nsecret-x", b"", hashlib.sha256).digest()).decode()

    assert feishu_sign("1700000000", "secret-x") == expected


def test_dingtalk_signature_keys_hmac_with_the_secret_over_timestamp_and_secret() -> None:
    expected = base64.b64encode(
        hmac.new(b"SECabc", b"1700000000000\nSECabc", hashlib.sha256).digest()
    ).decode()

    assert dingtalk_sign("1700000000000", "SECabc") == expected
    assert dingtalk_sign("1700000000000", "SECabc") != feishu_sign("1700000000000", "SECabc")


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ("sign not match, more: [https://ding-doc.dingtalk.com/doc#/serverapi2/qf2nxq]", "sign"),
        ("invalid timestamp", "sign"),
        (
            "description:机器人发送签名不匹配;solution:请确认签名和生成签名的时间戳必须都放在调用的网址中",
            "sign",
        ),
        ("ip 203.0.113.9 not in whitelist", "ip"),
        ("description:IP地址不在白名单中;solution:联系管理员", "ip"),
        ("keywords not in content", "keyword"),
        ("description:关键词不匹配;solution:请联系群管理员查看此机器人的关键词", "keyword"),
        ("description:something else entirely", None),
    ],
)
def test_dingtalk_security_failures_are_told_apart_by_their_message(message: str, cause: str | None) -> None:
    assert security_cause(message) == cause
