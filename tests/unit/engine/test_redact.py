"""The engine's diagnostics are redacted by the shared rules: what a provider, the engine or the agent
reports never carries a credential in a query string, userinfo, auth header, webhook path or name=value."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from wepush.agent.engine import REDACTION_MASK as MASK
from wepush.agent.engine import SecretMasker, redact_diagnostic


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("POST https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7a2b: 93000", "693a91f6-7a2b"),
        ("https://oapi.dingtalk.com/robot/send?access_token=abc123def&sign=x9y8z7", "abc123def"),
        ("https://open.feishu.cn/open-apis/bot/v2/hook/0f8e2c1a-1b2c-4d5e-9f00-123456789abc", "0f8e2c1a"),
        ("smtp://mailer:p4ssw0rd@smtp.local:465 refused", "p4ssw0rd"),
        ("sent Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
        ("Authorization: token ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F"),
        ('{"appSecret": "correct horse battery"} rejected', "horse battery"),
        ("{'operation': 'REPLACE', 'value': 'hunter2xyz'}", "hunter2xyz"),
        ("login failed: pwd=hunter22; retry", "hunter22"),
        # An access-log line has no scheme, so no URL rule sees it; the name is percent-encoded.
        ("GET /api/v1/workspaces/w/accounts?access%5Ftoken=QSECRET444 200", "QSECRET444"),
        ("GET /x?page=2&%61pi%4Bey=QSECRET555 200", "QSECRET555"),
        # A value is masked whole, not up to the first character a name=value word stops at.
        ('"GET /api/v1/workspaces?token=a,COMMA-QSECRET666 HTTP/1.1" 401', "QSECRET666"),
        ('"GET /x?page=1&token=ab"cd-QSECRET777 HTTP/1.1" 401', "QSECRET777"),
        ("GET /x?access_token=a;b{c}<QSECRET888> HTTP/1.1", "QSECRET888"),
        ("GET /x?jwt=QSECRET-JWT-16&page=2 HTTP/1.1", "QSECRET-JWT"),
        ("GET /x?bearer=QSECRET-BEARER-19 HTTP/1.1", "QSECRET-BEARER"),
        ("GET /x?session=QSECRET-SESS-17 HTTP/1.1", "QSECRET-SESS"),
    ],
)
def test_a_diagnostic_never_keeps_a_credential(text: str, secret: str) -> None:
    redacted = redact_diagnostic(text)

    assert redacted is not None
    assert secret not in redacted
    assert MASK in redacted


@pytest.mark.parametrize(
    "text",
    [
        # An exception's qualified class name is followed by its message, not by a value.
        "wepush.server.domain.secrets.MasterKeyError: master key file /etc/wepush/master.key is open to others",
        # The last segment of a file path, then prose.
        "cannot write the bootstrap token file /srv/data/bootstrap-admin.token: Too many levels of symbolic links",
    ],
)
def test_messages_that_only_look_like_name_value_pairs_keep_their_words(text: str) -> None:
    assert redact_diagnostic(text) == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("tokens: apiKey: QSECRET-AK1", "QSECRET-AK1"),
        ("/callback/token=QSECRET-PATH1", "QSECRET-PATH1"),
        ("/callback/api.token=QSECRET-PATH2", "QSECRET-PATH2"),
        ("config.secret: QSECRET-DOT3", "QSECRET-DOT3"),
        ("secret_key: QSECRET-LOWER4", "QSECRET-LOWER4"),
    ],
)
def test_the_exceptions_for_messages_do_not_let_a_value_through(text: str, secret: str) -> None:
    redacted = redact_diagnostic(text)
    assert redacted is not None
    assert secret not in redacted


@pytest.mark.parametrize(
    "text",
    [
        # A validation issue on a secret field: "<pointer>: <message>".
        "provider session cannot be opened: ConfigError: /accessToken: is neither an access token nor a "
        "webhook URL",
        "/signingSecret: must start with SEC",
        # Vendors' error codes named after what failed, then their message.
        "Aliyun SMS code SignatureDoesNotMatch: Specified signature is not matched with our calculation.",
        "Aliyun SMS code InvalidAccessKeyId.NotFound: Specified access key is not found.",
        "Aliyun SMS code IncompleteSignature: The request signature does not conform to Aliyun standards.",
    ],
)
def test_a_sentence_about_a_secret_field_keeps_its_words(text: str) -> None:
    assert redact_diagnostic(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("access_token: 8f3a9c2b7d1e4f60", f"access_token: {MASK}"),
        ("signature=abc123def456 rejected", f"signature={MASK} rejected"),
        ('{"accessToken": "x"}', f'{{"accessToken": "{MASK}"}}'),
        # The same shapes as the sentences above, with a value where the sentence was.
        (
            "/accessToken: bad-token! is neither an access token",
            f"/accessToken: {MASK} is neither an access token",
        ),
        (
            "SignatureDoesNotMatch: 8f3a9c2b7d1e4f60 is not matched",
            f"SignatureDoesNotMatch: {MASK} is not matched",
        ),
        (
            "InvalidAccessKeyId.NotFound: LTAI5tQ8x access key",
            f"InvalidAccessKeyId.NotFound: {MASK} access key",
        ),
        ("password: swordfish is wrong", f"password: {MASK} is wrong"),
        # A prose word is a value when nothing follows it, or when the separator is not ": ".
        ("password: specified", f"password: {MASK}"),
        ("signature=is not matched", f"signature={MASK} not matched"),
        ("token:is neither", f"token:{MASK} neither"),
        ('"accessToken": is neither', f'"accessToken": {MASK} neither'),
        ('{"signature": "Specified signature"}', f'{{"signature": "{MASK}"}}'),
    ],
)
def test_a_value_in_the_shape_of_those_sentences_is_still_masked(text: str, expected: str) -> None:
    assert redact_diagnostic(text) == expected


def test_literal_secrets_are_masked_and_the_length_is_capped() -> None:
    redacted = redact_diagnostic("vendor echoed s3cr3t-literal " + "x" * 2000, secrets=("s3cr3t-literal",))

    assert redacted is not None
    assert "s3cr3t-literal" not in redacted
    assert len(redacted) == 1024
    assert redacted.endswith("…")


def test_ordinary_diagnostics_are_left_alone() -> None:
    text = "HTTP 429 from https://api.vendor.local/v1/messages?page=2; retry after PT5S"

    assert redact_diagnostic(text) == text


def test_a_masker_scrubs_registered_values_in_text_and_json() -> None:
    masker = SecretMasker()
    masker.add_secret_value("s/p@ss word")

    assert masker.text("pw=s%2Fp%40ss%20word or s/p@ss word") == f"pw={MASK} or {MASK}"
    assert masker.json({"note": ["s/p@ss word"], "apiKey": 7, "token": None}) == {
        "note": [MASK],
        "apiKey": MASK,
        "token": None,
    }


@pytest.mark.parametrize(
    "echoed",
    [
        "QaBearer%2DZX81%2Dplaintext%2D9c4e7a1b",  # only the dashes percent-encoded (QA's vendor)
        "QaBearer%2dZX81-plaintext%2D9c4e7a1b",  # mixed, in both cases of hex
        "".join(f"\\u{ord(c):04x}" for c in "QaBearer-ZX81-plaintext-9c4e7a1b"),  # JSON, every char
        "QaBearer\\u002DZX81-plaintext-9c4e7a1b",
        "".join(f"%{ord(c):02X}" for c in "QaBearer-ZX81-plaintext-9c4e7a1b"),
        "QaBearer&#45;ZX81&#x2d;plaintext-9c4e7a1b",  # HTML character references
    ],
)
def test_a_masker_scrubs_a_registered_value_however_its_characters_are_escaped(echoed: str) -> None:
    masker = SecretMasker()
    masker.add_secret_value("QaBearer-ZX81-plaintext-9c4e7a1b")

    assert masker.text(f'{{"error": "bad token", "echo": "{echoed}"}}') == (
        f'{{"error": "bad token", "echo": "{MASK}"}}'
    )
    # In another case it is the same key as far as a reader is concerned (QA's vendor upper-cased it).
    assert masker.text("key QABEARER-ZX81-PLAINTEXT-9C4E7A1B refused") == f"key {MASK} refused"


@pytest.mark.parametrize("before", ["", "u", "u:", "user:"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_masker_scrubs_a_registered_value_echoed_in_base64_alone_or_inside_a_longer_value(
    before: str, encode: Callable[[bytes], bytes]
) -> None:
    """A vendor echoing ``Authorization: Basic base64(user:password)`` (QA's echoed the bare base64)."""
    masker = SecretMasker()
    secret = 'SUPERSECRETx9/+&=<>"k'
    masker.add_secret_value(secret)
    echoed = encode(f"{before}{secret}".encode()).decode("ascii")

    masked = masker.text(f"echo={echoed}")

    assert MASK in masked
    revealed = masked.removeprefix("echo=").split(MASK)
    # Before the mask at most the characters a neighbour's bits reach; after it nothing, as the secret
    # ends the value (QA read the last characters of a Basic credential's password from its last group).
    assert len(revealed[0]) <= len(encode(before.encode())) + 3, masked
    assert revealed[-1] == "", masked
    assert masker.text(f"echo={echoed.rstrip('=')}") != f"echo={echoed.rstrip('=')}"


def test_a_masker_leaves_base64_of_other_values_alone() -> None:
    masker = SecretMasker()
    masker.add_secret_value('SUPERSECRETx9/+&=<>"k')
    other = base64.b64encode(b"an ordinary payload of the same length").decode("ascii")

    assert masker.text(other) == other


def test_a_masker_scrubs_escaped_non_ascii_and_released_values_are_left_alone() -> None:
    masker = SecretMasker()
    secret = 'a b"c\\d中😀'
    masker.add_secret_value(secret)
    masker.add_secret_value(secret)

    for form in (secret, "a+b%22c%5Cd%E4%B8%AD%F0%9F%98%80", json.dumps(secret)[1:-1]):
        assert masker.text(f"<{form}>") == f"<{MASK}>"
    masker.discard_secret_value(secret)
    assert masker.text(secret) == MASK  # registered twice, discarded once
    masker.discard_secret_value(secret)
    assert masker.text(secret) == secret


def test_a_masker_masks_the_start_of_a_registered_value_a_capped_diagnostic_cut_off() -> None:
    masker = SecretMasker()
    masker.add_secret_value("k7Qx9Lm2Pz")
    capped = redact_diagnostic("x" * 1015 + "k7Qx9Lm2Pz was refused")
    assert capped is not None
    assert capped.endswith("k7Qx9Lm2…")

    assert masker.text(capped) == "x" * 1015 + f"{MASK}…"
    assert masker.text("plain text…") == "plain text…"
