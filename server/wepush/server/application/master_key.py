"""Master key rotation, the database half: re-wrap every secret's DEK under the active key version.

Only the wrapped DEK changes (``SecretStore.rewrap``); ciphertexts and their record binding stay as they
are, so a re-wrap can never change what a secret decrypts to. Records are re-wrapped a batch per
transaction with optimistic updates: a record edited meanwhile is simply picked up again by the next
batch, and an interrupted run is finished by running it again. Each workspace touched gets one audit
event with the count, never any key or secret material.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from wepush.server.application.audit import Auditor
from wepush.server.application.auth import Principal, PrincipalType
from wepush.server.domain import SecretRecord, UnitOfWorkFactory, VersionConflict
from wepush.server.domain.secrets import (
    MasterKeyError,
    SecretDecryptionError,
    SecretStore,
    sealed_secret_of,
)

__all__ = ["MasterKeyRewrap", "RewrapReport"]

_BATCH: Final = 100
_OPERATOR: Final = Principal(type=PrincipalType.SYSTEM, id="wepush-secrets")


@dataclass(frozen=True, slots=True)
class RewrapReport:
    rewrapped: int
    """Records whose DEK is now wrapped by ``active_version``."""
    active_version: int
    by_version: dict[int, int]
    """Records per key version after the run."""


class MasterKeyRewrap:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        store: SecretStore,
        clock: Callable[[], datetime],
        *,
        batch: int = _BATCH,
    ) -> None:
        self._uow = uow
        self._store = store
        self._auditor = Auditor(clock)
        self._batch = batch

    async def usage(self) -> dict[int, int]:
        async with self._uow(read_only=True) as uow:
            return await uow.secret_records.count_by_key_version()

    async def rewrap_all(self, active_version: int) -> RewrapReport:
        """Re-wrap every record not yet under ``active_version`` (the store's active version)."""
        per_workspace: Counter[str] = Counter()
        while True:
            async with self._uow() as uow:
                records = await uow.secret_records.list_not_wrapped_by(active_version, self._batch)
                for record in records:
                    try:
                        rewrapped = self._rewrapped(record)
                    except SecretDecryptionError:
                        # Its batch rolls back; the batches before it stay re-wrapped, as a re-run expects.
                        raise MasterKeyError(
                            f"secret record {record.id} (workspace {record.workspace_id}) cannot be opened "
                            f"with master key version {record.key_version} of the key ring; "
                            f"{sum(per_workspace.values())} secrets were re-wrapped before it"
                        ) from None
                    if rewrapped.key_version != active_version:
                        raise RuntimeError(
                            f"the secret store wraps with master key version {rewrapped.key_version}, "
                            f"not the expected active version {active_version}"
                        )
                    try:
                        await uow.secret_records.update(rewrapped)
                    except VersionConflict:
                        continue  # edited meanwhile: the next batch reads it again
                    per_workspace[record.workspace_id] += 1
            if len(records) < self._batch:
                break
        async with self._uow() as uow:
            for workspace_id, count in sorted(per_workspace.items()):
                await self._auditor.record(
                    uow,
                    _OPERATOR,
                    "secret.rewrap",
                    "SECRET_RECORD",
                    workspace_id=workspace_id,
                    fields=["encrypted_dek", "dek_nonce", "key_version"],
                    summary=f"{count} secrets re-wrapped under master key version {active_version}",
                )
            usage = await uow.secret_records.count_by_key_version()
        return RewrapReport(sum(per_workspace.values()), active_version, usage)

    def _rewrapped(self, record: SecretRecord) -> SecretRecord:
        sealed = self._store.rewrap(sealed_secret_of(record))
        return dataclasses.replace(
            record,
            encrypted_dek=sealed.encrypted_dek,
            dek_nonce=sealed.dek_nonce,
            key_version=sealed.key_version,
        )
