"""Alibaba Cloud API signature V3 (``ACS3-HMAC-SHA256``) for RPC-style calls.

CanonicalRequest = method \\n path \\n canonical query \\n canonical headers \\n
signed header names \\n hex(SHA-256(body)); the string to sign is
``ACS3-HMAC-SHA256\\n`` + hex(SHA-256(CanonicalRequest)) and the signature is
hex(HMAC-SHA-256(AccessKeySecret, string to sign)). Signed headers are ``host``,
``content-type`` when present and every ``x-acs-*`` header, lower-cased and sorted.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

__all__ = ["ALGORITHM", "SignedCall", "canonical_query", "percent_encode", "sign_call"]

ALGORITHM = "ACS3-HMAC-SHA256"


def percent_encode(value: str) -> str:
    """RFC 3986: only ``A-Z a-z 0-9 - _ . ~`` stay literal (space is %20, ``*`` is %2A)."""
    return quote(value, safe="-_.~")


def canonical_query(params: Sequence[tuple[str, str]]) -> str:
    encoded = sorted((percent_encode(k), percent_encode(v)) for k, v in params)
    return "&".join(f"{k}={v}" for k, v in encoded)


@dataclass(frozen=True, slots=True)
class SignedCall:
    """The query string and headers of a signed call (``Authorization`` included)."""

    query: str
    headers: Mapping[str, str]
    signature: str

    def __repr__(self) -> str:
        return f"SignedCall(headers={sorted(self.headers)})"


def sign_call(
    *,
    method: str,
    host: str,
    action: str,
    version: str,
    params: Sequence[tuple[str, str]],
    access_key_id: str,
    access_key_secret: str,
    now: datetime,
    nonce: str,
    body: bytes = b"",
    path: str = "/",
) -> SignedCall:
    hashed_payload = hashlib.sha256(body).hexdigest()
    headers = {
        "host": host,
        "x-acs-action": action,
        "x-acs-version": version,
        "x-acs-date": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "x-acs-signature-nonce": nonce,
        "x-acs-content-sha256": hashed_payload,
    }
    names = sorted(headers)
    canonical_headers = "".join(f"{name}:{headers[name].strip()}\n" for name in names)
    signed_headers = ";".join(names)
    query = canonical_query(params)
    canonical_request = f"{method}\n{path}\n{query}\n{canonical_headers}\n{signed_headers}\n{hashed_payload}"
    string_to_sign = f"{ALGORITHM}\n{hashlib.sha256(canonical_request.encode('utf-8')).hexdigest()}"
    signature = hmac.new(
        access_key_secret.encode("utf-8"), string_to_sign.encode("utf-8"), hashlib.sha256
    ).hexdigest()
    authorization = (
        f"{ALGORITHM} Credential={access_key_id},SignedHeaders={signed_headers},Signature={signature}"
    )
    return SignedCall(query, {**headers, "Authorization": authorization}, signature)
