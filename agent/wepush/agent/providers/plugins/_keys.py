"""Publisher keys: Ed25519 key pairs, key ids and detached manifest signatures.

A trusted key is written as base64 of the raw 32-byte public key (the form
``wepush.plugins.trusted-keys`` takes) or as a PEM ``PUBLIC KEY`` block. A key
id is the lowercase hex SHA-256 of the raw public key; the manifest names the
key id that signed it, so the agent can say *which* key it did not trust.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "PublisherKeyError",
    "PublisherKeyPair",
    "SignatureCheck",
    "TrustedKeys",
    "generate_key_pair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "public_key_text",
    "sign_bytes",
]

_SIGNATURE_BYTES = 64


class PublisherKeyError(ValueError):
    """A key cannot be read: wrong encoding, wrong algorithm, or an encrypted private key."""


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def public_key_text(public_key: Ed25519PublicKey) -> str:
    """The configuration form of a public key: base64 of the raw 32 bytes."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def load_public_key(text: str) -> Ed25519PublicKey:
    """Accept base64 of the raw key or a PEM ``PUBLIC KEY`` block."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(stripped.encode("ascii"))
        except (ValueError, UnicodeEncodeError) as exc:
            raise PublisherKeyError("not a readable PEM public key") from exc
        if not isinstance(key, Ed25519PublicKey):
            raise PublisherKeyError("the PEM public key is not an Ed25519 key")
        return key
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PublisherKeyError("not base64 and not a PEM block") from exc
    if len(raw) != 32:
        raise PublisherKeyError(f"an Ed25519 public key has 32 bytes, this one has {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """An unencrypted PKCS#8 PEM Ed25519 private key (as ``wepush plugin keygen`` writes it)."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError as exc:
        raise PublisherKeyError(
            "the private key is encrypted; decrypt it to a 0600 file for signing"
        ) from exc
    except ValueError as exc:
        # The library's message may quote key material; say only what went wrong.
        raise PublisherKeyError("not a readable PEM private key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise PublisherKeyError("the private key is not an Ed25519 key")
    return key


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """``key_id`` of the trusted signer when the signature holds; otherwise ``problem`` says why not."""

    key_id: str | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class PublisherKeyPair:
    private_pem: bytes
    public_text: str
    key_id: str

    def __repr__(self) -> str:
        return f"PublisherKeyPair(key_id={self.key_id!r}, private_pem=<redacted>)"


def generate_key_pair() -> PublisherKeyPair:
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = private.public_key()
    return PublisherKeyPair(pem, public_key_text(public), key_id(public))


def sign_bytes(private_key: Ed25519PrivateKey, data: bytes) -> str:
    """The detached signature file content: base64 of the 64-byte Ed25519 signature, one line."""
    return base64.b64encode(private_key.sign(data)).decode("ascii") + "\n"


class TrustedKeys(Mapping[str, Ed25519PublicKey]):
    """The publisher keys an agent accepts, by key id."""

    def __init__(self, keys: Iterable[str | Ed25519PublicKey] = ()) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {}
        for index, key in enumerate(keys):
            try:
                public = key if isinstance(key, Ed25519PublicKey) else load_public_key(key)
            except PublisherKeyError as exc:
                raise PublisherKeyError(f"trusted key #{index + 1}: {exc}") from exc
            self._keys[key_id(public)] = public

    def __getitem__(self, item: str) -> Ed25519PublicKey:
        return self._keys[item]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def verify(self, manifest: bytes, signature_text: bytes, declared_key_id: str | None) -> SignatureCheck:
        """Whether a trusted key signed exactly these manifest bytes, and if not, why."""
        key, problem = self._judge(manifest, signature_text, declared_key_id)
        return SignatureCheck(key, problem)

    def _judge(
        self, manifest: bytes, signature_text: bytes, declared_key_id: str | None
    ) -> tuple[str | None, str | None]:
        try:
            signature = base64.b64decode(signature_text.strip(), validate=True)
        except (binascii.Error, ValueError):
            signature = b""
        if len(signature) != _SIGNATURE_BYTES:
            return None, "bad signature: plugin.json.sig is not base64 of a 64-byte Ed25519 signature"
        if declared_key_id is not None and declared_key_id not in self._keys:
            trusted = "none are configured" if not self._keys else f"{len(self._keys)} configured"
            return None, (
                f"untrusted publisher key: the manifest is signed by key {declared_key_id}, "
                f"which is not among the trusted publisher keys ({trusted})"
            )
        candidates = [declared_key_id] if declared_key_id is not None else list(self._keys)
        for candidate in candidates:
            try:
                self._keys[candidate].verify(signature, manifest)
            except InvalidSignature:
                continue
            return candidate, None
        if declared_key_id is not None:
            return None, (
                f"bad signature: plugin.json.sig does not verify plugin.json with trusted key "
                f"{declared_key_id} (was the manifest changed after signing?)"
            )
        return None, "untrusted publisher key: no trusted publisher key verifies plugin.json.sig"
