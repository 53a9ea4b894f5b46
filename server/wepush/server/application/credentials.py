"""API tokens, agent credentials and enrollment tokens: issue, parse, hash, verify, check validity.

Token shape: ``<prefix>_<43 chars>`` where the prefix names the issuing domain (``wpn`` user API token,
``wpa`` agent credential, ``wpe`` one-time enrollment token) and the body is 256 random bits in
unpadded URL-safe base64. The prefix lets secret scanners and the log Redactor recognise a leaked token
and lets authentication route a token to the right table before any lookup.

Only a hash is stored: HMAC-SHA-256 keyed with a server-wide pepper (at least 32 random bytes, the same on
every Service instance, kept outside the database). A database dump alone therefore cannot be used to
test guesses, and because the hash is deterministic it doubles as the lookup key (a UNIQUE index on it).
Changing the pepper invalidates every issued token. The plaintext exists only in :class:`TokenIssued`,
returned once at creation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Final

__all__ = [
    "CredentialRejected",
    "CredentialState",
    "TokenHasher",
    "TokenIssued",
    "TokenKind",
    "TokenMalformed",
    "credential_state",
    "ensure_credential_usable",
    "parse_token",
    "split_authorization",
]

TOKEN_RANDOM_BYTES: Final = 32
_BODY_CHARS: Final = 43  # unpadded base64url of 32 bytes
_HINT_BODY_CHARS: Final = 4  # 24 bits shown in listings; leaves 232 secret bits
_MIN_PEPPER_BYTES: Final = 32
_TOKEN_PATTERN: Final = re.compile(r"(wpn|wpa|wpe)_([A-Za-z0-9_-]{43})")


class TokenKind(StrEnum):
    """The issuing domain of a token, spelled as its prefix."""

    USER = "wpn"
    AGENT = "wpa"
    ENROLLMENT = "wpe"


class CredentialState(StrEnum):
    ACTIVE = "ACTIVE"
    EXPIRED = "EXPIRED"
    REVOKED = "REVOKED"
    CONSUMED = "CONSUMED"


class TokenMalformed(Exception):
    """The presented text is not a WePush token (or not of the expected kind)."""

    code: ClassVar[str] = "AUTHENTICATION_REQUIRED"
    status: ClassVar[int] = 401

    def __init__(self) -> None:
        super().__init__("credential is not a valid WePush token")


class CredentialRejected(Exception):
    """A well-formed, known credential that may not be used any more."""

    code: ClassVar[str] = "AUTHENTICATION_REQUIRED"
    status: ClassVar[int] = 401

    def __init__(self, state: CredentialState) -> None:
        super().__init__(f"credential is {state.value.lower()}")
        self.state = state


@dataclass(frozen=True, slots=True)
class TokenIssued:
    """A freshly issued token. ``plaintext`` is shown to the user once and never stored."""

    plaintext: str = field(repr=False)
    hash: str
    prefix_hint: str
    kind: TokenKind


class TokenHasher:
    """Issues tokens and computes/verifies their stored hash with the server pepper."""

    __slots__ = ("_pepper",)

    def __init__(self, pepper: bytes) -> None:
        if len(pepper) < _MIN_PEPPER_BYTES:
            raise ValueError(f"token pepper must be at least {_MIN_PEPPER_BYTES} bytes")
        self._pepper = bytes(pepper)

    def __repr__(self) -> str:
        return "TokenHasher(pepper=***)"

    def issue(self, kind: TokenKind) -> TokenIssued:
        body = base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_RANDOM_BYTES)).rstrip(b"=").decode("ascii")
        plaintext = f"{kind.value}_{body}"
        return TokenIssued(
            plaintext=plaintext,
            hash=self.hash(plaintext),
            prefix_hint=f"{kind.value}_{body[:_HINT_BODY_CHARS]}",
            kind=kind,
        )

    def hash(self, token: str) -> str:
        """Hex HMAC-SHA-256 of the whole token text (prefix included, so kinds never collide)."""
        return hmac.new(self._pepper, token.encode("utf-8"), hashlib.sha256).hexdigest()

    def verify(self, token: str, stored_hash: str) -> bool:
        """Constant-time comparison of the presented token against a stored hash."""
        return hmac.compare_digest(self.hash(token).encode("ascii"), stored_hash.encode("ascii", "replace"))


def parse_token(token: str, expected: TokenKind | None = None) -> TokenKind:
    """Return the token's kind, or raise :class:`TokenMalformed` (also when it is not ``expected``)."""
    match = _TOKEN_PATTERN.fullmatch(token)
    if match is None:
        raise TokenMalformed()
    kind = TokenKind(match.group(1))
    if expected is not None and kind is not expected:
        raise TokenMalformed()
    return kind


def split_authorization(header: str | None) -> tuple[str, str] | None:
    """Split an ``Authorization`` value into (lower-case scheme, credentials), e.g. ``("bearer", "wpn_...")``.

    The seed's enrollment call uses ``Authorization: Enrollment <token>``; API clients use ``Bearer``.
    """
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    credentials = credentials.strip()
    if not scheme or not credentials or " " in credentials:
        return None
    return scheme.lower(), credentials


def credential_state(
    *,
    now: datetime,
    expires_at: datetime | None = None,
    revoked_at: datetime | None = None,
    consumed_at: datetime | None = None,
) -> CredentialState:
    """The state of a stored credential record at ``now``.

    Revocation wins over consumption (one-time enrollment tokens) which wins over expiry, so audits and
    error messages name the decisive reason. All datetimes must be timezone-aware.
    """
    for value in (now, expires_at, revoked_at, consumed_at):
        if value is not None and value.utcoffset() is None:
            raise ValueError("credential timestamps must be timezone-aware")
    if revoked_at is not None:
        return CredentialState.REVOKED
    if consumed_at is not None:
        return CredentialState.CONSUMED
    if expires_at is not None and now >= expires_at:
        return CredentialState.EXPIRED
    return CredentialState.ACTIVE


def ensure_credential_usable(
    *,
    now: datetime,
    expires_at: datetime | None = None,
    revoked_at: datetime | None = None,
    consumed_at: datetime | None = None,
) -> None:
    """Raise :class:`CredentialRejected` unless the record is ACTIVE at ``now``."""
    state = credential_state(now=now, expires_at=expires_at, revoked_at=revoked_at, consumed_at=consumed_at)
    if state is not CredentialState.ACTIVE:
        raise CredentialRejected(state)
