from __future__ import annotations

import pytest

from wepush.agent.engine import redact_diagnostic
from wepush.server.infra.logging import MASK, Redactor, is_sensitive_name

USER_TOKEN = "wpn_" + "A1b2C3d4" * 5 + "xyz"
AGENT_CREDENTIAL = "wpa_" + "Zz09-_Yy" * 5 + "abc"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor()


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "Cookie",
        "Set-Cookie",
        "X-WePush-Agent-Credential",
        "X-WePush-Enrollment-Token",
        "X-Api-Key",
        "X-Key-Id",
        "X-Auth-Token",
        "X-Client-Secret",
        "X-Db-Password",
        "Proxy-Authorization",
    ],
)
def test_sensitive_headers_are_masked(redactor: Redactor, name: str) -> None:
    assert redactor.headers({name: "s3cr3t-value"}) == {name: MASK}


def test_ordinary_headers_are_kept_but_their_urls_are_cleaned(redactor: Redactor) -> None:
    headers = [("Content-Type", "application/json"), ("Referer", "https://ui.local/run?access_token=abc123")]

    assert redactor.headers(headers) == [
        ("Content-Type", "application/json"),
        ("Referer", f"https://ui.local/run?access_token={MASK}"),
    ]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://oapi.dingtalk.com/robot/send?access_token=abc123&timestamp=1&sign=xyz",
            f"https://oapi.dingtalk.com/robot/send?access_token={MASK}&timestamp=1&sign={MASK}",
        ),
        (
            "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6",
            f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={MASK}",
        ),
        (
            "https://h/p?sig=1&Signature=2&password=3&q=ok",
            f"https://h/p?sig={MASK}&Signature={MASK}&password={MASK}&q=ok",
        ),
        ("postgresql://wepush:pa55word@db:5432/wepush", f"postgresql://{MASK}@db:5432/wepush"),
        ("https://ghp_tokenvalue@github.com/o/r.git", f"https://{MASK}@github.com/o/r.git"),
        (
            "https://app.local/cb#access_token=abc&state=1",
            f"https://app.local/cb#access_token={MASK}&state=1",
        ),
        ("https://h/path?page=2", "https://h/path?page=2"),
    ],
)
def test_url_userinfo_and_sensitive_parameters_are_masked(
    redactor: Redactor, url: str, expected: str
) -> None:
    assert redactor.url(url) == expected


def test_json_fields_with_sensitive_names_are_masked_recursively(redactor: Redactor) -> None:
    document = {
        "name": "ops-mail",
        "config": {
            "host": "smtp.local",
            "password": "hunter22",
            "apiKey": "k-123456",
            "nested": [{"clientSecret": "cs-999999", "port": 25}],
        },
        "headers": {"Authorization": "Bearer abcdefgh"},
        "secretId": "sec-1",
    }

    assert redactor.json(document) == {
        "name": "ops-mail",
        "config": {
            "host": "smtp.local",
            "password": MASK,
            "apiKey": MASK,
            "nested": [{"clientSecret": MASK, "port": 25}],
        },
        "headers": {"Authorization": MASK},
        "secretId": "sec-1",
    }


def test_secret_update_operations_hide_the_value_but_keep_the_operation(redactor: Redactor) -> None:
    update = {
        "token": {"operation": "REPLACE", "value": "secret-1"},
        "password": {"operation": "KEEP"},
        "webhookUrl": {"operation": "REPLACE", "value": "https://hooks.local/T000/B000/XXXX"},
    }

    assert redactor.json(update) == {
        "token": {"operation": "REPLACE", "value": MASK},
        "password": {"operation": "KEEP"},
        "webhookUrl": {"operation": "REPLACE", "value": MASK},
    }


def test_secret_status_metadata_stays_readable(redactor: Redactor) -> None:
    status = {"token": {"configured": True, "updatedAt": "2026-08-22T00:00:00Z"}}

    assert redactor.json(status) == status


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"user presented {USER_TOKEN} twice", f"user presented wpn_{MASK} twice"),
        (f"agent {AGENT_CREDENTIAL}", f"agent wpa_{MASK}"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", f"Authorization: {MASK} {MASK}"),
        ("sent header Bearer abcdefghijkl", f"sent header Bearer {MASK}"),
        ("Enrollment wpe_abcdefghijk", f"Enrollment {MASK}"),
        ("connect failed password=hunter22 host=db", f"connect failed password={MASK} host=db"),
        ('body {"token": "t-987654", "count": 3}', f'body {{"token": "{MASK}", "count": 3}}'),
        ("GET /api/v1/x?token=abc&page=2", f"GET /api/v1/x?token={MASK}&page=2"),
        ("secretId=sec-1 state=READY", "secretId=sec-1 state=READY"),
        ("plain message with no secrets", "plain message with no secrets"),
    ],
)
def test_known_secret_shapes_in_free_text_are_masked(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.text(text) == expected


def test_private_key_blocks_are_masked(redactor: Redactor) -> None:
    pem = (
        "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\nend"
    )

    redacted = redactor.text(pem)

    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in redacted
    assert redacted.endswith("end")


def test_registered_secret_values_are_scrubbed_everywhere(redactor: Redactor) -> None:
    redactor.add_secret_value("correct horse battery")
    redactor.add_secret_value(b"s/p@ss?word")

    assert (
        redactor.text("login as bob with correct horse battery failed") == f"login as bob with {MASK} failed"
    )
    assert redactor.text("q=s%2Fp%40ss%3Fword") == f"q={MASK}"
    assert redactor.json({"note": "pw is s/p@ss?word"}) == {"note": f"pw is {MASK}"}


def test_discarded_secret_values_are_no_longer_scrubbed(redactor: Redactor) -> None:
    redactor.add_secret_value("temporary-secret")
    redactor.discard_secret_value("temporary-secret")

    assert redactor.text("temporary-secret") == "temporary-secret"
    assert "temporary-secret" not in repr(redactor)


def test_very_short_values_are_not_registered(redactor: Redactor) -> None:
    redactor.add_secret_value("abc")

    assert redactor.text("abcabc") == "abcabc"


def test_exception_traceback_is_redacted(redactor: Redactor) -> None:
    redactor.add_secret_value("p4ssw0rd-from-account")

    def connect() -> None:
        raise ConnectionError(
            "auth failed for smtp://mailer:p4ssw0rd-from-account@smtp.local "
            f"using {USER_TOKEN} and api_key=zzz999"
        )

    try:
        try:
            connect()
        except ConnectionError as inner:
            raise RuntimeError("delivery failed") from inner
    except RuntimeError as exc:
        formatted = redactor.exception(exc)

    assert "Traceback (most recent call last)" in formatted
    assert "delivery failed" in formatted
    assert "p4ssw0rd-from-account" not in formatted
    assert USER_TOKEN not in formatted
    assert "zzz999" not in formatted
    assert f"api_key={MASK}" in formatted


@pytest.mark.parametrize(
    ("name", "sensitive"),
    [
        ("access_token", True),
        ("appSecret", True),
        ("encodingAESKey", True),
        ("sign", True),
        ("signature", True),
        ("secretId", False),
        ("keyVersion", False),
        ("name", False),
        ("runId", False),
    ],
)
def test_sensitive_name_rule(name: str, sensitive: bool) -> None:
    assert is_sensitive_name(name) is sensitive


@pytest.mark.parametrize("name", ["X-Auth", "X-Upstream-Auth", "X-AuthToken", "X-Auth-User", "Auth"])
def test_headers_named_after_auth_are_masked(redactor: Redactor, name: str) -> None:
    assert redactor.headers([(name, "s3cr3t-value")]) == [(name, MASK)]


def test_an_author_header_is_not_mistaken_for_an_auth_header(redactor: Redactor) -> None:
    assert redactor.headers({"X-Author": "ops team"}) == {"X-Author": "ops team"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"password": "correct horse battery"}', f'{{"password": "{MASK}"}}'),
        ("{'password': 'correct horse battery'}", f"{{'password': '{MASK}'}}"),
        ('password="a \\"quoted\\" phrase" user=bob', f'password="{MASK}" user=bob'),
        ('{\\"token\\": \\"t 987 654\\", \\"count\\": 3}', f'{{\\"token\\": \\"{MASK}\\", \\"count\\": 3}}'),
        ("secret='never closed and more words", f"secret='{MASK}"),
        ("password=b'raw bytes here'", f"password=b'{MASK}'"),
        ('{"password": ""}', '{"password": ""}'),
    ],
)
def test_a_quoted_value_is_masked_up_to_its_closing_quote(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "update {'operation': 'REPLACE', 'value': 'hunter2xyz'}",
            f"update {{'operation': 'REPLACE', 'value': '{MASK}'}}",
        ),
        ('{"value": "hunter2 xyz", "operation": "set"}', f'{{"value": "{MASK}", "operation": "set"}}'),
        (
            '{"token": {"operation": "REPLACE", "value": "s1"}, "limit": {"value": "10"}}',
            f'{{"token": {{"operation": "REPLACE", "value": "{MASK}"}}, "limit": {{"value": "10"}}}}',
        ),
        ("operation=REPLACE value=hunter2xyz", f"operation=REPLACE value={MASK}"),
        ("{'operation': 'UPSERT', 'value': 'visible'}", "{'operation': 'UPSERT', 'value': 'visible'}"),
    ],
)
def test_the_value_of_a_secret_update_in_free_text_is_masked(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.text(text) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://open.feishu.cn/open-apis/bot/v2/hook/0f8e2c1a-1b2c-4d5e-9f00-123456789abc",
            f"https://open.feishu.cn/open-apis/bot/v2/hook/{MASK}",
        ),
        (
            "https://hooks.slack.com/services/T0001ABCD/B0001WXYZ/abcdEFGHijklMNOPqrstUVWX",
            f"https://hooks.slack.com/services/{MASK}/{MASK}/{MASK}",
        ),
        (
            "https://discord.com/api/webhooks/112233445566/Tok3n-Value_xyz",
            f"https://discord.com/api/webhooks/{MASK}/{MASK}",
        ),
        (
            "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-1111",
            f"https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={MASK}",
        ),
    ],
)
def test_the_path_after_a_webhook_hook_segment_is_masked(redactor: Redactor, url: str, expected: str) -> None:
    assert redactor.text(f"POST {url} -> 403") == f"POST {expected} -> 403"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: token ghp_16C7e42F292c6912E7710c838347Ae178B4a", f"Authorization: {MASK} {MASK}"),
        ("Authorization: ACS3-HMAC-SHA256 Credential=LTAI5t/abc", f"Authorization: {MASK} {MASK}"),
        ("sent token ghp_16C7e42F292c6912E7710c838347Ae178B4a", f"sent token {MASK}"),
        ("the token expired at noon", "the token expired at noon"),
    ],
)
def test_any_authorization_scheme_is_masked_with_its_credential(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "POST https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7a2b failed",
        "https://open.feishu.cn/open-apis/bot/v2/hook/0f8e2c1a-1b2c-4d5e-9f00-123456789abc timed out",
        "connect postgresql://wepush:pa55word@db:5432/wepush refused",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig",
        '{"password": "correct horse battery", "user": "bob"}',
        "{'operation': 'REPLACE', 'value': 'hunter2xyz'}",
        f"agent {AGENT_CREDENTIAL} and client_secret=cs-999999",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    ],
)
def test_agent_diagnostics_follow_the_same_rules_as_the_service_logs(redactor: Redactor, text: str) -> None:
    # The engine may not import the Service; both use the one rule set the engine owns.
    assert redact_diagnostic(text) == redactor.text(text)
    assert MASK in redactor.text(text)


def test_a_pair_inside_the_value_of_an_ordinary_pair_is_still_masked(redactor: Redactor) -> None:
    assert redactor.text("login failed: pwd=hunter22; retry") == f"login failed: pwd={MASK}; retry"
