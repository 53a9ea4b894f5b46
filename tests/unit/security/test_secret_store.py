from __future__ import annotations

import dataclasses

import pytest

from wepush.server.domain.secrets import SealedSecret, SecretStore
from wepush.server.infra.secrets import (
    LocalEnvelopeSecretStore,
    MasterKeyError,
    MasterKeyRing,
    SecretDecryptionError,
)

WORKSPACE = "ws-1"
SECRET_ID = "sec-42"
SECRET_TYPE = "ACCOUNT_FIELD"
PLAINTEXT = b"smtp-password-\xe4\xbd\xa0\xe5\xa5\xbd"


@pytest.fixture
def store() -> LocalEnvelopeSecretStore:
    return LocalEnvelopeSecretStore(MasterKeyRing.generate())


def seal(store: SecretStore, version: int = 1) -> SealedSecret:
    return store.encrypt(WORKSPACE, SECRET_ID, SECRET_TYPE, version, PLAINTEXT)


def test_sealed_secret_round_trips_to_a_zeroable_bytearray(store: LocalEnvelopeSecretStore) -> None:
    sealed = seal(store)

    opened = store.decrypt(sealed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)

    assert isinstance(opened, bytearray)
    assert opened == PLAINTEXT
    assert PLAINTEXT not in sealed.ciphertext
    assert sealed.algorithm == "AES-256-GCM"
    assert sealed.key_version == 1
    assert len(sealed.nonce) == 12
    assert len(sealed.dek_nonce) == 12


def test_each_encryption_uses_a_fresh_dek_and_nonce(store: LocalEnvelopeSecretStore) -> None:
    first, second = seal(store), seal(store)

    assert first.ciphertext != second.ciphertext
    assert first.nonce != second.nonce
    assert first.encrypted_dek != second.encrypted_dek


@pytest.mark.parametrize(
    ("workspace", "secret_id", "secret_type", "version"),
    [
        ("ws-2", SECRET_ID, SECRET_TYPE, 1),
        (WORKSPACE, "sec-43", SECRET_TYPE, 1),
        (WORKSPACE, SECRET_ID, "OTHER_TYPE", 1),
        (WORKSPACE, SECRET_ID, SECRET_TYPE, 2),
    ],
    ids=["other-workspace", "other-secret-id", "other-type", "other-record-version"],
)
def test_ciphertext_moved_to_another_record_identity_does_not_decrypt(
    store: LocalEnvelopeSecretStore, workspace: str, secret_id: str, secret_type: str, version: int
) -> None:
    sealed = seal(store, version=1)

    with pytest.raises(SecretDecryptionError):
        store.decrypt(sealed, workspace, secret_id, secret_type, version)


def test_identity_fields_cannot_be_shifted_between_each_other(store: LocalEnvelopeSecretStore) -> None:
    sealed = store.encrypt("ab", "c", SECRET_TYPE, 1, PLAINTEXT)

    with pytest.raises(SecretDecryptionError):
        store.decrypt(sealed, "a", "bc", SECRET_TYPE, 1)


@pytest.mark.parametrize("field", ["ciphertext", "nonce", "encrypted_dek", "dek_nonce"])
def test_tampered_envelope_fails_without_details(store: LocalEnvelopeSecretStore, field: str) -> None:
    sealed = seal(store)
    original: bytes = getattr(sealed, field)
    tampered = SealedSecret(
        **{**dataclasses.asdict(sealed), field: bytes([original[0] ^ 0x01]) + original[1:]}
    )

    with pytest.raises(SecretDecryptionError) as caught:
        store.decrypt(tampered, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)

    assert str(caught.value) == "secret could not be decrypted"


def test_unknown_algorithm_is_refused(store: LocalEnvelopeSecretStore) -> None:
    sealed = dataclasses.replace(seal(store), algorithm="CHACHA20-POLY1305")

    with pytest.raises(SecretDecryptionError):
        store.decrypt(sealed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)


def test_swapping_wrapped_deks_between_secrets_fails(store: LocalEnvelopeSecretStore) -> None:
    first, second = seal(store), seal(store)
    mixed = dataclasses.replace(first, encrypted_dek=second.encrypted_dek, dek_nonce=second.dek_nonce)

    with pytest.raises(SecretDecryptionError):
        store.decrypt(mixed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)


def test_rotation_then_rewrap_keeps_secret_readable_under_the_new_version(
    store: LocalEnvelopeSecretStore,
) -> None:
    sealed = seal(store)
    new_version = store.key_ring.rotate()

    still_readable = store.decrypt(sealed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)
    rewrapped = store.rewrap(sealed)

    assert new_version == 2
    assert still_readable == PLAINTEXT
    assert rewrapped.key_version == 2
    assert rewrapped.ciphertext == sealed.ciphertext
    assert rewrapped.nonce == sealed.nonce
    assert rewrapped.encrypted_dek != sealed.encrypted_dek
    assert store.decrypt(rewrapped, WORKSPACE, SECRET_ID, SECRET_TYPE, 1) == PLAINTEXT
    assert seal(store).key_version == 2


def test_rewrapped_secret_survives_retiring_the_old_version(store: LocalEnvelopeSecretStore) -> None:
    sealed = seal(store)
    store.key_ring.rotate()
    rewrapped = store.rewrap(sealed)

    store.key_ring.retire(1)

    assert store.decrypt(rewrapped, WORKSPACE, SECRET_ID, SECRET_TYPE, 1) == PLAINTEXT
    with pytest.raises(MasterKeyError, match="version 1 is not in the key ring"):
        store.decrypt(sealed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)


def test_relabelled_key_version_does_not_decrypt(store: LocalEnvelopeSecretStore) -> None:
    sealed = seal(store)
    store.key_ring.rotate()

    with pytest.raises(SecretDecryptionError):
        store.decrypt(dataclasses.replace(sealed, key_version=2), WORKSPACE, SECRET_ID, SECRET_TYPE, 1)


def test_secret_sealed_with_an_unknown_key_version_fails_closed(store: LocalEnvelopeSecretStore) -> None:
    sealed = dataclasses.replace(seal(store), key_version=7)

    with pytest.raises(MasterKeyError, match="version 7"):
        store.decrypt(sealed, WORKSPACE, SECRET_ID, SECRET_TYPE, 1)
    with pytest.raises(MasterKeyError):
        store.rewrap(sealed)


def test_another_ring_cannot_open_the_secret(store: LocalEnvelopeSecretStore) -> None:
    other = LocalEnvelopeSecretStore(MasterKeyRing.generate())

    with pytest.raises(SecretDecryptionError):
        other.decrypt(seal(store), WORKSPACE, SECRET_ID, SECRET_TYPE, 1)


def test_store_and_ring_reprs_carry_no_key_material(store: LocalEnvelopeSecretStore) -> None:
    store.key_ring.rotate()

    assert repr(store) == "LocalEnvelopeSecretStore(MasterKeyRing(active_version=2, versions=(1, 2)))"
