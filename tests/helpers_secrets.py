"""Seal a secret the way the Service stores an account's: encrypted by the secret store, kept as a record."""

from __future__ import annotations

from datetime import datetime

from wepush.server.domain import SecretRecord, UnitOfWork, new_id
from wepush.server.domain.secrets import SecretStore, secret_record_of


async def add_account_secret(
    unit: UnitOfWork,
    store: SecretStore,
    *,
    workspace_id: str,
    account_id: str,
    name: str,
    value: bytes,
    now: datetime,
) -> SecretRecord:
    """Seal ``value`` as version 1 of the account's secret ``name`` and add its record in ``unit``."""
    record_id = new_id()
    sealed = store.encrypt(workspace_id, record_id, name, 1, value)
    return await unit.secret_records.add(
        secret_record_of(
            sealed,
            record_id=record_id,
            workspace_id=workspace_id,
            owner_type="ACCOUNT",
            owner_id=account_id,
            name=name,
            record_version=1,
            created_at=now,
            updated_at=now,
        )
    )
