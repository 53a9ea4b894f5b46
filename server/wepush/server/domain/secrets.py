"""The SecretStore port: how the Service seals account secrets before they reach the database.

A sealed secret is an envelope: the plaintext is encrypted with a fresh data-encryption key (DEK),
and the DEK is wrapped by a versioned master key that never enters the database. The record identity
(workspace, secret id, secret type, record version) is bound to the ciphertext as associated data, so a
ciphertext copied onto another record or another version of the same record fails to decrypt.

The port is synchronous on purpose: sealing is a few microseconds of CPU and has no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from ._records import SecretRecord

__all__ = [
    "SECRET_ALGORITHM",
    "MasterKeyError",
    "SealedSecret",
    "SecretDecryptionError",
    "SecretScrubber",
    "SecretStore",
    "SecretStoreError",
    "sealed_secret_of",
    "secret_record_of",
]

SECRET_ALGORITHM: Final = "AES-256-GCM"  # noqa: S105 - an algorithm name, not a credential


class SecretStoreError(Exception):
    """Base of every secret store failure. Messages never carry key material or plaintext."""


class SecretDecryptionError(SecretStoreError):
    """A sealed secret could not be opened: tampered, moved to another record, or a wrong key.

    Deliberately carries no detail: telling a caller *which* check failed helps an attacker, not an operator.
    """

    def __init__(self) -> None:
        super().__init__("secret could not be decrypted")


class MasterKeyError(SecretStoreError):
    """The master key ring is missing, unsafe, malformed, or lacks a version a secret was sealed with.

    Raised at start-up (fail closed) and when a sealed secret names an unknown key version.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class SealedSecret:
    """What the database stores for one secret. Nothing here is sensitive without the master key."""

    ciphertext: bytes
    nonce: bytes
    encrypted_dek: bytes
    dek_nonce: bytes
    algorithm: str = SECRET_ALGORITHM
    key_version: int


class SecretStore(Protocol):
    """Seals and opens account secrets.

    ``encrypt`` binds the result to (workspace_id, secret_id, secret_type, record_version); ``decrypt``
    must be given exactly the same identity or it raises :class:`SecretDecryptionError`. A sealed secret
    whose ``key_version`` is not in the key ring raises :class:`MasterKeyError`.

    ``decrypt`` returns a ``bytearray`` so the caller can zero it (``buf[:] = bytes(len(buf))``) as soon
    as the value has been used.

    ``rewrap`` re-encrypts only the DEK under the currently active master key version (key rotation);
    the ciphertext, its nonce and the record binding are unchanged.
    """

    def encrypt(
        self,
        workspace_id: str,
        secret_id: str,
        secret_type: str,
        record_version: int,
        plaintext: bytes | bytearray,
    ) -> SealedSecret: ...

    def decrypt(
        self,
        sealed: SealedSecret,
        workspace_id: str,
        secret_id: str,
        secret_type: str,
        record_version: int,
    ) -> bytearray: ...

    def rewrap(self, sealed: SealedSecret) -> SealedSecret: ...


class SecretScrubber(Protocol):
    """The Service's one redactor, as use cases see it (the composition root passes the logging one).

    While a run or a connection test holds a decrypted secret, its value is registered so that every log
    line, run log line and diagnostic masks it wherever it shows up (a webhook URL whose secret is in the
    path has no shape a rule could recognise). ``add_secret_value`` and ``discard_secret_value`` must be
    reference-counted: two runs sharing one secret each add it, and the first to finish must not unmask
    it for the other. ``text`` and ``json`` apply the registered values and every shape rule.
    """

    def add_secret_value(self, value: str | bytes | bytearray) -> None: ...

    def discard_secret_value(self, value: str | bytes | bytearray) -> None: ...

    def text(self, text: str) -> str: ...

    def json(self, value: object) -> object: ...


def sealed_secret_of(record: SecretRecord) -> SealedSecret:
    """The envelope a ``secret_record`` row stores, as the SecretStore takes it."""
    return SealedSecret(
        ciphertext=record.ciphertext,
        nonce=record.nonce,
        encrypted_dek=record.encrypted_dek,
        dek_nonce=record.dek_nonce,
        algorithm=record.algorithm,
        key_version=record.key_version,
    )


def secret_record_of(
    sealed: SealedSecret,
    *,
    record_id: str,
    workspace_id: str,
    owner_type: str,
    owner_id: str,
    name: str,
    record_version: int,
    created_at: datetime,
    updated_at: datetime,
    version: int = 1,
) -> SecretRecord:
    """The ``secret_record`` row that stores ``sealed`` (the inverse of :func:`sealed_secret_of`).
    ``record_version`` must be the one the envelope was sealed with: it is bound into its AAD."""
    return SecretRecord(
        id=record_id,
        workspace_id=workspace_id,
        owner_type=owner_type,
        owner_id=owner_id,
        name=name,
        ciphertext=sealed.ciphertext,
        nonce=sealed.nonce,
        encrypted_dek=sealed.encrypted_dek,
        dek_nonce=sealed.dek_nonce,
        algorithm=sealed.algorithm,
        key_version=sealed.key_version,
        record_version=record_version,
        created_at=created_at,
        updated_at=updated_at,
        version=version,
    )
