from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from wepush.server.application.credentials import (
    CredentialRejected,
    CredentialState,
    TokenHasher,
    TokenKind,
    TokenMalformed,
    credential_state,
    ensure_credential_usable,
    parse_token,
    split_authorization,
)

PEPPER = b"p" * 32
NOW = datetime(2026, 8, 22, 12, 0, tzinfo=UTC)


@pytest.fixture
def hasher() -> TokenHasher:
    return TokenHasher(PEPPER)


@pytest.mark.parametrize(
    ("kind", "prefix"), [(TokenKind.USER, "wpn_"), (TokenKind.AGENT, "wpa_"), (TokenKind.ENROLLMENT, "wpe_")]
)
def test_issued_token_has_its_prefix_and_256_random_bits(
    hasher: TokenHasher, kind: TokenKind, prefix: str
) -> None:
    issued = hasher.issue(kind)

    assert re.fullmatch(prefix + r"[A-Za-z0-9_-]{43}", issued.plaintext)
    assert issued.prefix_hint == issued.plaintext[:8]
    assert issued.kind is kind
    assert parse_token(issued.plaintext) is kind


def test_only_the_hash_is_meant_for_storage_and_it_verifies(hasher: TokenHasher) -> None:
    issued = hasher.issue(TokenKind.USER)

    assert issued.hash != issued.plaintext
    assert issued.plaintext not in repr(issued)
    assert re.fullmatch(r"[0-9a-f]{64}", issued.hash)
    assert hasher.hash(issued.plaintext) == issued.hash
    assert hasher.verify(issued.plaintext, issued.hash)


def test_wrong_token_or_other_pepper_does_not_verify(hasher: TokenHasher) -> None:
    issued = hasher.issue(TokenKind.AGENT)
    other = hasher.issue(TokenKind.AGENT)

    assert not hasher.verify(other.plaintext, issued.hash)
    assert not TokenHasher(b"q" * 32).verify(issued.plaintext, issued.hash)
    assert not hasher.verify(issued.plaintext, "not-a-hash-\u00e9")


def test_tokens_are_unique(hasher: TokenHasher) -> None:
    assert len({hasher.issue(TokenKind.USER).plaintext for _ in range(200)}) == 200


def test_short_pepper_is_refused_and_never_shown() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        TokenHasher(b"short")
    assert "p" * 32 not in repr(TokenHasher(PEPPER))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "wpn_",
        "wpx_" + "a" * 43,
        "wpn_" + "a" * 42,
        "wpn_" + "a" * 44,
        "wpn_" + "a" * 42 + "!",
        "Bearer wpn_x",
    ],
)
def test_malformed_tokens_are_rejected_before_any_lookup(text: str) -> None:
    with pytest.raises(TokenMalformed) as caught:
        parse_token(text)

    assert caught.value.code == "AUTHENTICATION_REQUIRED"


def test_token_of_another_issuing_domain_is_rejected(hasher: TokenHasher) -> None:
    agent_credential = hasher.issue(TokenKind.AGENT).plaintext

    with pytest.raises(TokenMalformed):
        parse_token(agent_credential, expected=TokenKind.USER)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Bearer wpn_abc", ("bearer", "wpn_abc")),
        ("Enrollment  wpe_abc ", ("enrollment", "wpe_abc")),
        ("Bearer", None),
        ("Bearer a b", None),
        ("", None),
        (None, None),
    ],
)
def test_authorization_header_is_split_into_scheme_and_credentials(
    header: str | None, expected: tuple[str, str] | None
) -> None:
    assert split_authorization(header) == expected


@pytest.mark.parametrize(
    ("expires_at", "revoked_at", "consumed_at", "state"),
    [
        (None, None, None, CredentialState.ACTIVE),
        (NOW + timedelta(seconds=1), None, None, CredentialState.ACTIVE),
        (NOW, None, None, CredentialState.EXPIRED),
        (NOW - timedelta(days=1), None, None, CredentialState.EXPIRED),
        (NOW + timedelta(days=1), NOW - timedelta(hours=1), None, CredentialState.REVOKED),
        (NOW + timedelta(days=1), None, NOW - timedelta(minutes=1), CredentialState.CONSUMED),
        (NOW - timedelta(days=1), NOW - timedelta(hours=1), NOW, CredentialState.REVOKED),
    ],
    ids=["no-expiry", "before-expiry", "at-expiry", "after-expiry", "revoked", "consumed", "revoked-wins"],
)
def test_credential_state_from_record_fields(
    expires_at: datetime | None,
    revoked_at: datetime | None,
    consumed_at: datetime | None,
    state: CredentialState,
) -> None:
    assert (
        credential_state(now=NOW, expires_at=expires_at, revoked_at=revoked_at, consumed_at=consumed_at)
        is state
    )


def test_unusable_credential_is_rejected_with_the_reason() -> None:
    ensure_credential_usable(now=NOW, expires_at=NOW + timedelta(hours=1))

    with pytest.raises(CredentialRejected) as caught:
        ensure_credential_usable(now=NOW, revoked_at=NOW)

    assert caught.value.state is CredentialState.REVOKED
    assert caught.value.code == "AUTHENTICATION_REQUIRED"
    assert caught.value.status == 401


def test_naive_timestamps_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        credential_state(now=datetime(2026, 1, 1), expires_at=NOW)
