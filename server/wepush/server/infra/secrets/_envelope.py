"""LocalEnvelopeSecretStore: the default SecretStore (AES-256-GCM envelope under a local master key ring)."""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Iterable
from typing import Final

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from wepush.server.domain.secrets import (
    SECRET_ALGORITHM,
    SealedSecret,
    SecretDecryptionError,
)
from wepush.server.infra.secrets._keyring import MasterKeyRing, open_aes_gcm

__all__ = ["LocalEnvelopeSecretStore", "secret_aad"]

_DEK_BYTES: Final = 32
_NONCE_BYTES: Final = 12
_AAD_PREFIX: Final = b"wepush/secret/v1"


def secret_aad(workspace_id: str, secret_id: str, secret_type: str, record_version: int) -> bytes:
    """Canonical associated data for one secret record version.

    Each field is length-prefixed, so no two different identities encode to the same bytes
    (``("ab", "c")`` and ``("a", "bc")`` differ), which is what makes the binding sound.
    """
    if isinstance(record_version, bool) or not isinstance(record_version, int) or record_version < 0:
        raise ValueError("record_version must be a non-negative integer")
    parts = [_AAD_PREFIX]
    for field in (workspace_id, secret_id, secret_type, str(record_version)):
        encoded = field.encode("utf-8")
        parts.append(struct.pack(">I", len(encoded)))
        parts.append(encoded)
    return b"".join(parts)


class LocalEnvelopeSecretStore:
    """Seals each secret with its own random 256-bit DEK; the DEK is wrapped by the master key ring.

    The database row keeps ciphertext, nonce, wrapped DEK, DEK nonce, algorithm and key version; the
    master keys stay in the ring, loaded from a file or the environment.
    """

    __slots__ = ("_reload", "_ring")

    def __init__(self, ring: MasterKeyRing, *, reload: Callable[[], MasterKeyRing] | None = None) -> None:
        """``reload`` reads the ring's source again: a secret wrapped by a version this process has not
        seen (a rotation run by ``wepush secrets rotate`` while the Service runs) is then opened once
        the new version is adopted, instead of failing until a restart. A new secret is always sealed
        under the source's active version, read again for it: sealed under the version this process
        started with, it would be lost once that version is retired from the file."""
        self._ring = ring
        self._reload = reload

    def _know(self, key_version: int) -> None:
        if key_version in self._ring.versions or self._reload is None:
            return
        self._ring.adopt(self._reload())

    def _follow_rotation(self) -> None:
        # A secret is written rarely (an account saved), so reading a small key file each time is cheap;
        # a source that cannot be read now fails the write rather than seal under a stale version.
        if self._reload is not None:
            self._ring.adopt(self._reload())

    def __repr__(self) -> str:
        return f"LocalEnvelopeSecretStore({self._ring!r})"

    def lacks(self, key_versions: Iterable[int]) -> list[int]:
        """The versions among ``key_versions`` (those the stored secrets use) that this ring cannot open
        even after reading its source again: such secrets fail wherever this process needs them."""
        unknown = sorted(set(key_versions) - set(self._ring.versions))
        if unknown and self._reload is not None:
            self._ring.adopt(self._reload())
            unknown = [version for version in unknown if version not in self._ring.versions]
        return unknown

    def missing_from_source(self, key_versions: Iterable[int]) -> list[int]:
        """The versions among ``key_versions`` that the ring's source (the key file) no longer holds,
        though this process may still hold them in memory: removed there (``wepush secrets retire`` from
        another data directory sharing the file), such secrets open until this process stops, and its
        next start is refused."""
        if self._reload is None:
            return []
        return sorted(set(key_versions) - set(self._reload().versions))

    @property
    def key_ring(self) -> MasterKeyRing:
        return self._ring

    def encrypt(
        self,
        workspace_id: str,
        secret_id: str,
        secret_type: str,
        record_version: int,
        plaintext: bytes | bytearray,
    ) -> SealedSecret:
        aad = secret_aad(workspace_id, secret_id, secret_type, record_version)
        self._follow_rotation()
        dek = bytearray(secrets.token_bytes(_DEK_BYTES))
        try:
            nonce = secrets.token_bytes(_NONCE_BYTES)
            ciphertext = AESGCM(dek).encrypt(nonce, plaintext, aad)
            key_version, dek_nonce, encrypted_dek = self._ring.wrap_dek(dek)
        finally:
            dek[:] = bytes(_DEK_BYTES)
        return SealedSecret(
            ciphertext=ciphertext,
            nonce=nonce,
            encrypted_dek=encrypted_dek,
            dek_nonce=dek_nonce,
            algorithm=SECRET_ALGORITHM,
            key_version=key_version,
        )

    def decrypt(
        self,
        sealed: SealedSecret,
        workspace_id: str,
        secret_id: str,
        secret_type: str,
        record_version: int,
    ) -> bytearray:
        if sealed.algorithm != SECRET_ALGORITHM:
            raise SecretDecryptionError()
        aad = secret_aad(workspace_id, secret_id, secret_type, record_version)
        self._know(sealed.key_version)
        dek = self._ring.unwrap_dek(sealed.key_version, sealed.dek_nonce, sealed.encrypted_dek)
        try:
            return open_aes_gcm(dek, sealed.nonce, sealed.ciphertext, aad)
        finally:
            dek[:] = bytes(len(dek))

    def rewrap(self, sealed: SealedSecret) -> SealedSecret:
        """Re-wrap only the DEK under the active key version; the ciphertext is untouched."""
        if sealed.algorithm != SECRET_ALGORITHM:
            raise SecretDecryptionError()
        self._know(sealed.key_version)
        self._follow_rotation()
        dek = self._ring.unwrap_dek(sealed.key_version, sealed.dek_nonce, sealed.encrypted_dek)
        try:
            key_version, dek_nonce, encrypted_dek = self._ring.wrap_dek(dek)
        finally:
            dek[:] = bytes(len(dek))
        return SealedSecret(
            ciphertext=sealed.ciphertext,
            nonce=sealed.nonce,
            encrypted_dek=encrypted_dek,
            dek_nonce=dek_nonce,
            algorithm=sealed.algorithm,
            key_version=key_version,
        )
