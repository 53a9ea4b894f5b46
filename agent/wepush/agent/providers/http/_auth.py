"""Authentication headers (or a query parameter) built from resolved secrets.

The ``SecretValue`` objects are closed as soon as the header values exist.
Python strings cannot be wiped, so the header values live exactly as long as
the session; ``forget`` drops them at close. The same literals, and their
URL-encoded forms for a query credential, are used to mask any echo of a
credential in diagnostics or saved response bodies.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import quote, quote_plus

from wepush.agent.providers.spi import SecretRef, SecretResolver

from ._config import AuthConfig, AuthType

__all__ = ["MASK", "AuthHeaders", "CredentialUnusable"]

MASK = "******"


class CredentialUnusable(ValueError):
    """A secret that cannot travel where the account puts it; the message names the field, never the value."""


def _header_safe(value: str, field: str) -> str:
    # HTTP clients refuse these in a header (they would split it): better one clear reason than an
    # "unexpected ValueError" on every request of a Run.
    if any(ch in value for ch in "\r\n\x00"):
        raise CredentialUnusable(
            f"the secret referenced by {field} contains a line break or NUL, which an HTTP header cannot "
            "carry: replace the secret with its value on one line"
        )
    return value


async def _reveal(resolver: SecretResolver, ref: SecretRef | None) -> str:
    if ref is None:
        raise ValueError("authentication secret reference is missing")
    secret = await resolver.resolve(ref)
    try:
        return secret.copy_str()
    finally:
        secret.close()


class AuthHeaders:
    """Headers that authenticate requests, and the literals that must never leak."""

    __slots__ = ("_headers", "_masked", "_query", "_secrets")

    def __init__(
        self,
        headers: Mapping[str, str],
        masked: Mapping[str, str],
        secrets: tuple[str, ...],
        query: Mapping[str, str] | None = None,
    ) -> None:
        self._headers = dict(headers)
        self._masked = dict(masked)
        self._query = dict(query or {})
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))

    @classmethod
    def none(cls) -> AuthHeaders:
        return cls({}, {}, ())

    @classmethod
    async def resolve(cls, auth: AuthConfig, resolver: SecretResolver) -> AuthHeaders:
        if auth.type is AuthType.BEARER:
            token = _header_safe(await _reveal(resolver, auth.token), "auth.token")
            return cls({"Authorization": f"Bearer {token}"}, {"Authorization": f"Bearer {MASK}"}, (token,))
        if auth.type is AuthType.BASIC:
            password = await _reveal(resolver, auth.password)
            pair = f"{auth.username or ''}:{password}"
            encoded = base64.b64encode(pair.encode("utf-8")).decode("ascii")
            return cls(
                {"Authorization": f"Basic {encoded}"},
                {"Authorization": f"Basic {MASK}"},
                (password, encoded, pair),
            )
        if auth.type is AuthType.HEADER:
            value = _header_safe(await _reveal(resolver, auth.value), "auth.value")
            name = auth.header_name or "Authorization"
            return cls({name: value}, {name: MASK}, (value,))
        if auth.type is AuthType.QUERY:
            value = await _reveal(resolver, auth.value)
            name = auth.parameter_name or "access_token"
            # A vendor may echo the request URL, where the value appears encoded.
            return cls({}, {}, (value, quote(value, safe=""), quote_plus(value)), {name: value})
        return cls.none()

    @property
    def headers(self) -> Mapping[str, str]:
        return MappingProxyType(self._headers)

    @property
    def query(self) -> Mapping[str, str]:
        """The query parameter that authenticates (auth type QUERY), else empty."""
        return MappingProxyType(self._query)

    def masked(self) -> dict[str, str]:
        """The same header names with the credential replaced by a fixed mask."""
        return dict(self._masked)

    def masked_query(self) -> dict[str, str]:
        """The same query parameter names with the credential replaced by a fixed mask."""
        return dict.fromkeys(self._query, MASK)

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def forget(self) -> None:
        self._headers.clear()
        self._query.clear()
        self._secrets = ()

    def __repr__(self) -> str:
        return f"AuthHeaders({sorted(self._masked)}, query={sorted(self._query)})"
