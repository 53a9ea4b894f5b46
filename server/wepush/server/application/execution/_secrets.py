"""``StoredSecretResolver``: account secrets, decrypted in-process for one run.

A run may only read the secrets its snapshot names, at the record version the snapshot froze. The
sealed record is opened with the SecretStore into a short-lived buffer, copied into a ``SecretValue``
(which the engine closes, zeroing it, when the run ends) and the buffer is zeroed at once.

``RegisteredSecrets`` wraps any resolver (a run's, a connection test's) so that every value it hands out
is registered with the Service's redactor until ``release()``: a webhook URL whose secret is a path
segment, or a password, has no shape a redaction rule could recognise.
"""

from __future__ import annotations

from collections.abc import Mapping

from wepush.agent.engine import SecretNotFoundError, SecretRef, SecretResolver, SecretValue
from wepush.server.domain import SecretRecord, UnitOfWorkFactory
from wepush.server.domain.secrets import SealedSecret, SecretScrubber, SecretStore

from ._fence import Retry, retrying
from ._snapshot import ACCOUNT_SECRET_OWNER

__all__ = ["RegisteredSecrets", "StoredSecretResolver", "open_secret_record"]


def open_secret_record(store: SecretStore, record: SecretRecord) -> bytearray:
    """Decrypt a secret record. The record binding is (workspace, record id, secret name, record version),
    the convention every writer of ``secret_record`` uses; the caller zeroes the returned buffer."""
    sealed = SealedSecret(
        ciphertext=record.ciphertext,
        nonce=record.nonce,
        encrypted_dek=record.encrypted_dek,
        dek_nonce=record.dek_nonce,
        algorithm=record.algorithm,
        key_version=record.key_version,
    )
    return store.decrypt(sealed, record.workspace_id, record.id, record.name, record.record_version)


class StoredSecretResolver:
    """The engine's SecretResolver for one run: ``{"$secret": name}`` → the account's ``secret_record``
    named ``name`` at the version recorded in the snapshot. A secret replaced after the run was created
    is refused rather than silently substituted."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        store: SecretStore,
        *,
        workspace_id: str,
        account_id: str,
        secret_versions: Mapping[str, int],
        retry: Retry = retrying,
    ) -> None:
        """``retry`` runs each read: an executing run passes its lease's (``LeaseGuard.retrying``), so a
        database outage delays a provider opening its session instead of failing the run."""
        self._uow = uow
        self._retry = retry
        self._store = store
        self._workspace_id = workspace_id
        self._account_id = account_id
        self._versions = dict(secret_versions)

    def __repr__(self) -> str:
        return f"StoredSecretResolver(account={self._account_id!r}, secrets={sorted(self._versions)})"

    async def resolve(self, ref: SecretRef) -> SecretValue:
        version = self._versions.get(ref.name)
        if version is None or (ref.version is not None and ref.version != str(version)):
            raise SecretNotFoundError(ref)

        async def read() -> SecretRecord | None:
            async with self._uow(read_only=True) as uow:
                return await uow.secret_records.find(
                    self._workspace_id, ACCOUNT_SECRET_OWNER, self._account_id, ref.name
                )

        record = await self._retry(read)
        if record is None or record.record_version != version:
            raise SecretNotFoundError(ref)
        plain = open_secret_record(self._store, record)
        try:
            return SecretValue(plain)
        finally:
            plain[:] = bytes(len(plain))


class RegisteredSecrets:
    """A SecretResolver that registers each value it resolves with ``scrubber`` until :meth:`release`.

    Each distinct value is registered once however often it is resolved, and released once; the
    scrubber's reference count keeps it masked while another run or test still holds it. The values are
    kept (as the scrubber keeps them) only until ``release``, which the owner calls when the run or the
    connection test has ended, whatever the outcome.
    """

    __slots__ = ("_inner", "_registered", "_scrubber")

    def __init__(self, inner: SecretResolver, scrubber: SecretScrubber) -> None:
        self._inner = inner
        self._scrubber = scrubber
        self._registered: set[bytes] = set()

    def __repr__(self) -> str:
        return f"RegisteredSecrets({self._inner!r}, registered={len(self._registered)})"

    async def resolve(self, ref: SecretRef) -> SecretValue:
        value = await self._inner.resolve(ref)
        plain = value.copy_bytes()
        if plain not in self._registered:
            # Registered before the value is handed out: nothing can log it unmasked in between.
            self._scrubber.add_secret_value(plain)
            self._registered.add(plain)
        return value

    def release(self) -> None:
        """Discard every registration this resolver made; safe to call more than once."""
        registered, self._registered = self._registered, set()
        for plain in registered:
            self._scrubber.discard_secret_value(plain)
