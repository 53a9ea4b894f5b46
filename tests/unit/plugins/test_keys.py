from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wepush.agent.providers.plugins import (
    PublisherKeyError,
    TrustedKeys,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
)
from wepush.agent.providers.plugins._keys import sign_bytes

MANIFEST = b'{"pluginId": "acme.echo"}\n'


def test_base64_and_pem_forms_name_the_same_key() -> None:
    pair = generate_key_pair()
    public = load_private_key(pair.private_pem).public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    from_text = load_public_key(pair.public_text)
    from_pem = load_public_key(pem.decode("ascii"))

    raw = base64.b64decode(pair.public_text)
    assert key_id(from_text) == key_id(from_pem) == pair.key_id == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not base64!", "not base64 and not a PEM block"),
        (base64.b64encode(b"short").decode(), "has 32 bytes, this one has 5"),
        ("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", "not a readable PEM public key"),
    ],
)
def test_unreadable_public_key_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(PublisherKeyError, match=reason):
        load_public_key(text)


def test_trusted_keys_name_the_key_that_cannot_be_read() -> None:
    with pytest.raises(PublisherKeyError, match="trusted key #2"):
        TrustedKeys([generate_key_pair().public_text, "garbage"])


def test_non_ed25519_keys_are_refused() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_pem = rsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )

    with pytest.raises(PublisherKeyError, match="not an Ed25519 key"):
        load_public_key(public_pem.decode("ascii"))
    with pytest.raises(PublisherKeyError, match="not an Ed25519 key"):
        load_private_key(private_pem)


def test_encrypted_private_key_is_refused_without_quoting_it() -> None:
    encrypted = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )

    with pytest.raises(PublisherKeyError, match="encrypted") as caught:
        load_private_key(encrypted)

    assert "BEGIN" not in str(caught.value)


def test_key_pair_repr_never_shows_the_private_key() -> None:
    pair = generate_key_pair()

    assert "PRIVATE" not in repr(pair)
    assert pair.key_id in repr(pair)


def test_signature_by_a_trusted_key_names_the_signer() -> None:
    pair = generate_key_pair()
    signature = sign_bytes(load_private_key(pair.private_pem), MANIFEST).encode()

    declared = TrustedKeys([pair.public_text]).verify(MANIFEST, signature, pair.key_id)
    undeclared = TrustedKeys([generate_key_pair().public_text, pair.public_text]).verify(
        MANIFEST, signature, None
    )

    assert (declared.key_id, declared.problem) == (pair.key_id, None)
    assert (undeclared.key_id, undeclared.problem) == (pair.key_id, None)


def test_signature_over_other_bytes_is_a_bad_signature() -> None:
    pair = generate_key_pair()
    signature = sign_bytes(load_private_key(pair.private_pem), MANIFEST).encode()

    check = TrustedKeys([pair.public_text]).verify(MANIFEST + b" ", signature, pair.key_id)

    assert check.key_id is None
    assert (check.problem or "").startswith("bad signature")


def test_signature_file_that_is_not_a_signature_is_refused() -> None:
    check = TrustedKeys([generate_key_pair().public_text]).verify(MANIFEST, b"hello", None)

    assert check.problem == "bad signature: plugin.json.sig is not base64 of a 64-byte Ed25519 signature"


def test_no_trusted_keys_means_no_signed_plugin_is_trusted() -> None:
    pair = generate_key_pair()
    signature = sign_bytes(load_private_key(pair.private_pem), MANIFEST).encode()

    check = TrustedKeys().verify(MANIFEST, signature, pair.key_id)

    assert "none are configured" in (check.problem or "")
