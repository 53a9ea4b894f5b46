"""The frozen Run snapshot: everything a Run executes from, captured when the Run is created.

The executor reads only the snapshot (and the immutable audience snapshot rows it names), never the live
Account, Message or Job, so editing them after a Run was created cannot change what the Run sends. Secret
values never appear: account configuration keeps ``{"$secret": "<name>"}`` references and the snapshot
records which version of each referenced secret record was current.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar

from wepush.server.domain import (
    Account,
    AudienceSnapshot,
    DomainError,
    ItemState,
    Job,
    JsonObject,
    MessageRevision,
    Run,
    RunTrigger,
    SecretRecord,
    UnitOfWork,
    canonical_json,
)

from ._policies import merge_policies, normalize_policies

__all__ = [
    "ACCOUNT_SECRET_OWNER",
    "SNAPSHOT_SPEC_VERSION",
    "AccountSnapshot",
    "AudienceRef",
    "InvalidSnapshot",
    "MessageSnapshot",
    "MissingSecret",
    "ProviderPin",
    "ResendOf",
    "RunSnapshot",
    "build_run_snapshot",
    "resend_snapshot",
    "secret_names",
    "snapshot_for_job",
]

SNAPSHOT_SPEC_VERSION = 1
ACCOUNT_SECRET_OWNER = "ACCOUNT"  # noqa: S105 - an owner type, not a credential
"""``secret_record.owner_type`` of account secrets (``owner_id`` is the account id)."""


class InvalidSnapshot(DomainError):
    """A stored snapshot cannot be read (unknown spec version or missing members)."""

    code: ClassVar[str] = "VALIDATION_FAILED"


class MissingSecret(DomainError):
    """The account configuration references a secret the account does not have."""

    code: ClassVar[str] = "PROVIDER_CONFIG_INVALID"

    def __init__(self, account_id: str, name: str) -> None:
        super().__init__(f"account {account_id} references secret {name!r}, which is not configured")
        self.account_id = account_id
        self.name = name


def _walk(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$secret")
        if isinstance(ref, str):
            yield ref
            return
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def secret_names(config: Mapping[str, Any]) -> frozenset[str]:
    """Names of every ``{"$secret": name}`` reference anywhere in ``config``."""
    return frozenset(_walk(config))


def _frozen_json(value: Any) -> Any:
    # A deep copy through canonical JSON: the snapshot owns its documents, nobody can mutate them later.
    return json.loads(canonical_json(value))


@dataclass(frozen=True, slots=True)
class ProviderPin:
    id: str
    version: str


@dataclass(frozen=True, slots=True)
class AccountSnapshot:
    id: str
    version: int
    schema_version: str
    config: JsonObject
    secret_versions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageSnapshot:
    id: str
    revision: int
    schema_version: str
    content: JsonObject


@dataclass(frozen=True, slots=True)
class AudienceRef:
    snapshot_id: str
    recipient_count: int


@dataclass(frozen=True, slots=True)
class ResendOf:
    """A resend run executes only the items of ``run_id`` whose outcome was one of ``outcomes``."""

    run_id: str
    outcomes: tuple[ItemState, ...]


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """Spec version 1. ``policies`` is the complete ExecutionPolicies JSON (defaults made explicit)."""

    run_id: str
    workspace_id: str
    job_id: str
    trigger: RunTrigger
    dry_run: bool
    provider: ProviderPin
    account: AccountSnapshot
    message: MessageSnapshot
    audience: AudienceRef
    policies: JsonObject
    source_run_id: str | None = None
    resend_of: ResendOf | None = None
    spec_version: int = SNAPSHOT_SPEC_VERSION

    def to_json(self) -> JsonObject:
        return {
            "specVersion": self.spec_version,
            "runId": self.run_id,
            "workspaceId": self.workspace_id,
            "jobId": self.job_id,
            "trigger": self.trigger.value,
            "sourceRunId": self.source_run_id,
            "dryRun": self.dry_run,
            "provider": {"id": self.provider.id, "version": self.provider.version},
            "account": {
                "id": self.account.id,
                "version": self.account.version,
                "schemaVersion": self.account.schema_version,
                "config": _frozen_json(self.account.config),
                "secretVersions": dict(sorted(self.account.secret_versions.items())),
            },
            "message": {
                "id": self.message.id,
                "revision": self.message.revision,
                "schemaVersion": self.message.schema_version,
                "content": _frozen_json(self.message.content),
            },
            "audience": {
                "snapshotId": self.audience.snapshot_id,
                "recipientCount": self.audience.recipient_count,
            },
            "policies": _frozen_json(self.policies),
            "resendOf": None
            if self.resend_of is None
            else {"runId": self.resend_of.run_id, "outcomes": [s.value for s in self.resend_of.outcomes]},
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunSnapshot:
        if doc.get("specVersion") != SNAPSHOT_SPEC_VERSION:
            raise InvalidSnapshot(f"unsupported run snapshot spec version {doc.get('specVersion')!r}")
        try:
            account = doc["account"]
            message = doc["message"]
            resend = doc.get("resendOf")
            return cls(
                run_id=str(doc["runId"]),
                workspace_id=str(doc["workspaceId"]),
                job_id=str(doc["jobId"]),
                trigger=RunTrigger(doc["trigger"]),
                source_run_id=doc.get("sourceRunId"),
                dry_run=bool(doc["dryRun"]),
                provider=ProviderPin(str(doc["provider"]["id"]), str(doc["provider"]["version"])),
                account=AccountSnapshot(
                    id=str(account["id"]),
                    version=int(account["version"]),
                    schema_version=str(account["schemaVersion"]),
                    config=_frozen_json(account["config"]),
                    secret_versions={str(k): int(v) for k, v in account.get("secretVersions", {}).items()},
                ),
                message=MessageSnapshot(
                    id=str(message["id"]),
                    revision=int(message["revision"]),
                    schema_version=str(message["schemaVersion"]),
                    content=_frozen_json(message["content"]),
                ),
                audience=AudienceRef(
                    str(doc["audience"]["snapshotId"]), int(doc["audience"]["recipientCount"])
                ),
                policies=_frozen_json(doc["policies"]),
                resend_of=None
                if resend is None
                else ResendOf(str(resend["runId"]), tuple(ItemState(s) for s in resend["outcomes"])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidSnapshot(f"run snapshot is malformed: {type(exc).__name__}: {exc}") from None

    def new_run(
        self,
        *,
        created_at: datetime,
        reason: str | None = None,
        schedule_id: str | None = None,
        idempotency_key_hash: str | None = None,
        confirmation_digest: str | None = None,
    ) -> Run:
        """The PENDING Run this snapshot belongs to (ids copied into their indexed columns)."""
        return Run(
            id=self.run_id,
            workspace_id=self.workspace_id,
            job_id=self.job_id,
            trigger=self.trigger,
            schedule_id=schedule_id,
            source_run_id=self.source_run_id,
            provider_id=self.provider.id,
            account_id=self.account.id,
            message_id=self.message.id,
            message_revision=self.message.revision,
            audience_snapshot_id=self.audience.snapshot_id,
            reason=reason,
            dry_run=self.dry_run,
            snapshot=self.to_json(),
            recipient_count=self.audience.recipient_count,
            idempotency_key_hash=idempotency_key_hash,
            confirmation_digest=confirmation_digest,
            created_at=created_at,
            updated_at=created_at,
        )


def build_run_snapshot(
    *,
    run_id: str,
    job: Job,
    account: Account,
    message: MessageRevision,
    audience: AudienceSnapshot,
    secret_records: Iterable[SecretRecord],
    trigger: RunTrigger = RunTrigger.MANUAL,
    dry_run: bool = False,
    policies: Mapping[str, Any] | None = None,
    message_schema_version: str | None = None,
) -> RunSnapshot:
    """Freeze the inputs of a new Run. ``policies`` defaults to the job's; overrides are the caller's merge
    (:func:`merge_policies`). Raises :class:`MissingSecret` or ``InvalidPolicies``."""
    versions = {record.name: record.record_version for record in secret_records}
    referenced = secret_names(account.config)
    for name in sorted(referenced):
        if name not in versions:
            raise MissingSecret(account.id, name)
    return RunSnapshot(
        run_id=run_id,
        workspace_id=job.workspace_id,
        job_id=job.id,
        trigger=trigger,
        dry_run=dry_run,
        provider=ProviderPin(account.provider_id, account.provider_version),
        account=AccountSnapshot(
            id=account.id,
            version=account.version,
            schema_version=account.schema_version,
            config=_frozen_json(account.config),
            secret_versions={name: versions[name] for name in sorted(referenced)},
        ),
        message=MessageSnapshot(
            id=message.message_id,
            revision=message.revision,
            schema_version=message_schema_version or account.schema_version,
            content=_frozen_json(message.content),
        ),
        audience=AudienceRef(audience.id, audience.recipient_count),
        policies=normalize_policies(job.policies if policies is None else policies),
    )


def resend_snapshot(
    source: RunSnapshot, *, run_id: str, outcomes: Collection[ItemState], recipient_count: int
) -> RunSnapshot:
    """A resend run copies the source run's snapshot (never the current resources) and names the outcomes
    its ``run_retry_item`` set was built from; ``recipient_count`` is the size of that set."""
    ordered = tuple(state for state in ItemState if state in outcomes)
    return replace(
        source,
        run_id=run_id,
        trigger=RunTrigger.RESEND,
        source_run_id=source.run_id,
        audience=AudienceRef(source.audience.snapshot_id, recipient_count),
        resend_of=ResendOf(source.run_id, ordered),
    )


async def snapshot_for_job(
    uow: UnitOfWork,
    *,
    workspace_id: str,
    job_id: str,
    run_id: str,
    trigger: RunTrigger = RunTrigger.MANUAL,
    dry_run: bool = False,
    policy_overrides: Mapping[str, Any] | None = None,
) -> RunSnapshot:
    """Load a job's account, message revision, audience snapshot and secret versions inside the caller's
    unit of work (the run-creation transaction) and freeze them."""
    # Held until the run is stored: the job cannot change accounts or be deleted under it meanwhile.
    job = await uow.jobs.get(workspace_id, job_id, referencing=True)
    account = await uow.accounts.get(workspace_id, job.account_id)
    revision = await uow.messages.get_revision(workspace_id, job.message_id, job.message_revision)
    audience = await uow.audiences.get_snapshot(workspace_id, job.audience_snapshot_id)
    records = await uow.secret_records.list_for_owner(workspace_id, ACCOUNT_SECRET_OWNER, account.id)
    return build_run_snapshot(
        run_id=run_id,
        job=job,
        account=account,
        message=revision,
        audience=audience,
        secret_records=records,
        trigger=trigger,
        dry_run=dry_run,
        policies=merge_policies(job.policies, policy_overrides),
    )
