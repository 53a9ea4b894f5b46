"""Account secrets: write operations, sealing before the transaction, and in-memory resolution.

A secret lives in a ``secret_record`` owned by the account (``owner_type`` ACCOUNT). The account's
``config`` only points at it with ``{"$secret": "<name>"}``. Sealing is pure CPU and happens before the
use case opens its transaction; the plaintext buffer is zeroed right after. A REPLACE of an existing
secret keeps the record id and bumps ``record_version``, which is bound into the AEAD associated data, so
an old ciphertext can never be copied back onto the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from wepush.agent.engine import SecretNotFoundError, SecretRef, SecretValue
from wepush.server.application.errors import FieldIssue
from wepush.server.domain import SecretRecord, UnitOfWork, UnitOfWorkFactory, new_id
from wepush.server.domain.secrets import SecretStore, sealed_secret_of, secret_record_of

__all__ = [
    "ACCOUNT_OWNER",
    "AccountSecretResolver",
    "SecretKeep",
    "SecretPlan",
    "SecretReplace",
    "SecretWrite",
    "seal_secret_writes",
    "secret_write_issues",
    "unreferenced_secret_issues",
]

ACCOUNT_OWNER: Final = "ACCOUNT"
MAX_SECRET_NAME_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class SecretReplace:
    """Store a new value. The value never appears in a repr, a log line or an error."""

    value: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class SecretKeep:
    """Keep the stored value unchanged."""


SecretWrite = SecretReplace | SecretKeep


def secret_type(name: str) -> str:
    """The secret type bound into the ciphertext: the record's name, the convention every reader and
    writer of ``secret_record`` shares (the run executor opens account secrets the same way)."""
    return name


def _where(name: str) -> str:
    if not _valid_name(name):
        # Submitted text is not echoed at any length: a name that is no valid name is not repeated back
        # (a 100,000-character one made a 200 KB problem).
        return "/secrets"
    return f"/secrets/{name.replace('~', '~0').replace('/', '~1')}"


def _valid_name(name: str) -> bool:
    return 1 <= len(name) <= MAX_SECRET_NAME_CHARS and name.isprintable()


def unreferenced_secret_issues(
    writes: Mapping[str, SecretWrite], referenced: Iterable[str]
) -> list[FieldIssue]:
    """A secret no ``{"$secret": name}`` of the configuration uses would be stored for nothing (usually a
    misspelt name, or a reference forgotten): refused rather than kept where nobody can see it."""
    used = set(referenced)
    return [
        FieldIssue(
            _where(name),
            "SECRET_NOT_REFERENCED",
            'no {"$secret": ...} in the configuration names it: reference it, or leave it out (a stored '
            "secret left out is deleted)",
        )
        for name in sorted(writes)
        if name not in used
    ]


def secret_write_issues(writes: Mapping[str, SecretWrite], existing: Iterable[str]) -> list[FieldIssue]:
    """Names must be short printable text; KEEP needs something to keep."""
    stored = set(existing)
    issues: list[FieldIssue] = []
    for name, write in writes.items():
        where = _where(name)
        if not _valid_name(name):
            issues.append(
                FieldIssue(
                    where,
                    "INVALID_NAME",
                    f"secret names must be 1..{MAX_SECRET_NAME_CHARS} printable characters",
                )
            )
        elif isinstance(write, SecretKeep) and name not in stored:
            issues.append(
                FieldIssue(where, "SECRET_NOT_CONFIGURED", "KEEP names a secret that is not stored")
            )
    return issues


@dataclass(frozen=True, slots=True)
class _SealedWrite:
    record: SecretRecord
    is_new: bool


@dataclass(frozen=True, slots=True)
class SecretPlan:
    """What a write does to the account's secret records, already sealed and ready to persist."""

    sealed: tuple[_SealedWrite, ...]
    kept: tuple[str, ...]
    removed: tuple[SecretRecord, ...]

    @property
    def changed_fields(self) -> list[str]:
        """Audit field names: replaced, added and removed secrets (names only, never values)."""
        names = [w.record.name for w in self.sealed] + [r.name for r in self.removed]
        return [f"secrets.{name}" for name in sorted(names)]

    @property
    def replaced_count(self) -> int:
        return len(self.sealed)

    async def apply(self, uow: UnitOfWork) -> None:
        for write in self.sealed:
            if write.is_new:
                await uow.secret_records.add(write.record)
            else:
                # Optimistic: the record must still be at the version the plan was sealed against.
                await uow.secret_records.update(write.record)
        for record in self.removed:
            await uow.secret_records.delete(record.workspace_id, record.id, record.version)


def seal_secret_writes(
    store: SecretStore,
    *,
    workspace_id: str,
    account_id: str,
    writes: Mapping[str, SecretWrite],
    existing: Mapping[str, SecretRecord],
    now: datetime,
) -> SecretPlan:
    """Seal every REPLACE; secrets stored but absent from ``writes`` are removed (contract semantics)."""
    sealed: list[_SealedWrite] = []
    kept: list[str] = []
    for name in sorted(writes):
        write = writes[name]
        if isinstance(write, SecretKeep):
            kept.append(name)
            continue
        current = existing.get(name)
        record_id = current.id if current is not None else new_id()
        record_version = current.record_version + 1 if current is not None else 1
        plaintext = bytearray(write.value.encode("utf-8"))
        try:
            envelope = store.encrypt(workspace_id, record_id, secret_type(name), record_version, plaintext)
        finally:
            plaintext[:] = bytes(len(plaintext))
        record = secret_record_of(
            envelope,
            record_id=record_id,
            workspace_id=workspace_id,
            owner_type=ACCOUNT_OWNER,
            owner_id=account_id,
            name=name,
            record_version=record_version,
            created_at=current.created_at if current is not None else now,
            updated_at=now,
            # The row version the update is based on (optimistic), 1 for a new record.
            version=current.version if current is not None else 1,
        )
        sealed.append(_SealedWrite(record, is_new=current is None))
    removed = tuple(existing[name] for name in sorted(existing) if name not in writes)
    return SecretPlan(tuple(sealed), tuple(kept), removed)


class AccountSecretResolver:
    """Resolves an account's ``SecretRef`` s by opening its sealed records, in memory only.

    Only sealed records are held; each ``resolve`` decrypts into a fresh :class:`SecretValue` the caller
    owns and closes, and the intermediate buffer is zeroed. The namespace of a reference is not
    consulted: an account's secrets form one namespace of their own. A reference that names a
    ``version`` must match the record's current ``record_version``.
    """

    def __init__(self, store: SecretStore, workspace_id: str, records: Iterable[SecretRecord]) -> None:
        self._store = store
        self._workspace_id = workspace_id
        self._records = {record.name: record for record in records}

    @classmethod
    async def load(
        cls, uow: UnitOfWorkFactory, store: SecretStore, workspace_id: str, account_id: str
    ) -> AccountSecretResolver:
        async with uow(read_only=True) as tx:
            records = await tx.secret_records.list_for_owner(workspace_id, ACCOUNT_OWNER, account_id)
        return cls(store, workspace_id, records)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._records)

    async def resolve(self, ref: SecretRef) -> SecretValue:
        record = self._records.get(ref.name)
        if record is None or (ref.version is not None and ref.version != str(record.record_version)):
            raise SecretNotFoundError(ref)
        plain = self._store.decrypt(
            sealed_secret_of(record),
            self._workspace_id,
            record.id,
            secret_type(record.name),
            record.record_version,
        )
        try:
            return SecretValue(plain)
        finally:
            plain[:] = bytes(len(plain))

    def __repr__(self) -> str:
        return f"AccountSecretResolver(<{len(self._records)} sealed secrets>)"
