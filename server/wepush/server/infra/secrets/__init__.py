"""Secret store adapters: the local envelope store and its master key ring."""

from __future__ import annotations

from wepush.server.domain.secrets import MasterKeyError, SecretDecryptionError, SecretStoreError
from wepush.server.infra.secrets._envelope import LocalEnvelopeSecretStore, secret_aad
from wepush.server.infra.secrets._keyring import MASTER_KEY_ENV, MasterKeyRing

__all__ = [
    "MASTER_KEY_ENV",
    "LocalEnvelopeSecretStore",
    "MasterKeyError",
    "MasterKeyRing",
    "SecretDecryptionError",
    "SecretStoreError",
    "secret_aad",
]
