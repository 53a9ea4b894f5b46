"""Creating runs: the impact preview with its confirmation token, the start transaction, and resends.

The start follows the seed's transaction: idempotency key → job and permission → account, message
revision, audience snapshot → provider present and compatible → immutable snapshot → PENDING run →
RUN_CREATED event and audit → idempotency record. The availability hint goes out after commit (the
caller's job); losing it only delays the claim until the executor's next scan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application._run_confirmation import confirmation_digest
from wepush.server.application._run_errors import (
    ConcurrencyOutOfRange,
    ConfirmationInvalid,
    InvalidPolicyOverrides,
)
from wepush.server.application._run_policies import spec_overrides
from wepush.server.application.errors import FieldIssue, ProviderConfigInvalid, ProviderNotAvailable
from wepush.server.application.execution import (
    InvalidPolicies,
    RunSnapshot,
    normalize_policies,
    snapshot_for_job,
)
from wepush.server.domain import (
    RESENDABLE_ITEM_STATES,
    DuplicateResource,
    ItemState,
    Job,
    Run,
    RunEventDraft,
    RunTrigger,
    UnitOfWork,
)

_OVERRIDES = "/policyOverrides"


@dataclass(frozen=True, slots=True)
class RunStartRequest:
    dry_run: bool = False
    policy_overrides: Mapping[str, Any] | None = None
    reason: str | None = None
    confirmation_token: str | None = None


def _policy_issues(error: InvalidPolicies, base: str) -> list[FieldIssue]:
    return [
        FieldIssue(f"{base}/{path.replace('.', '/')}" if path else base, code, message)
        for path, code, message in error.problems
    ]


def _job_range(job: Job) -> tuple[int, int]:
    try:
        concurrency = normalize_policies(job.policies)["concurrency"]
    except InvalidPolicies as error:
        raise InvalidPolicyOverrides(
            "The job's policies are invalid.", _policy_issues(error, "/policies")
        ) from None
    return int(concurrency["min"]), int(concurrency["max"])


def check_overrides(job: Job, overrides: Mapping[str, Any] | None) -> None:
    """Overrides may narrow the job's concurrency range, never widen it."""
    concurrency = (overrides or {}).get("concurrency") or {}
    low, high = _job_range(job)
    for name in ("min", "max", "target"):
        value = concurrency.get(name)
        if value is not None and not low <= int(value) <= high:
            raise ConcurrencyOutOfRange(f"{_OVERRIDES}/concurrency/{name}", int(value), (low, high))


async def freeze_job(
    uow: UnitOfWork,
    catalog: ProviderCatalog,
    *,
    workspace_id: str,
    job_id: str,
    run_id: str,
    dry_run: bool,
    overrides: Mapping[str, Any] | None,
) -> tuple[Job, RunSnapshot]:
    """Load the job and freeze what a run of it would execute now (also what a confirmation shows)."""
    job = await uow.jobs.get(workspace_id, job_id)
    try:
        overrides = spec_overrides(overrides, job.policies)
    except InvalidPolicies as error:
        raise InvalidPolicyOverrides(
            "The execution policy overrides are invalid.", _policy_issues(error, _OVERRIDES)
        ) from None
    check_overrides(job, overrides)
    try:
        snapshot = await snapshot_for_job(
            uow,
            workspace_id=workspace_id,
            job_id=job_id,
            run_id=run_id,
            trigger=RunTrigger.MANUAL,
            dry_run=dry_run,
            policy_overrides=overrides,
        )
    except InvalidPolicies as error:
        raise InvalidPolicyOverrides(
            "The effective execution policies are invalid.", _policy_issues(error, _OVERRIDES)
        ) from None
    check_provider(catalog, snapshot)
    return job, snapshot


def check_provider(catalog: ProviderCatalog, snapshot: RunSnapshot) -> None:
    factory = catalog.get(snapshot.provider.id)
    if factory is None:
        raise ProviderNotAvailable(snapshot.provider.id)
    supported = factory.descriptor().schema_versions
    if snapshot.account.schema_version not in supported:
        raise ProviderConfigInvalid(
            f"The account uses configuration schema {snapshot.account.schema_version}, which provider "
            f"{snapshot.provider.id} no longer supports.",
            [FieldIssue("/accountId", "SCHEMA_VERSION_UNSUPPORTED", f"supported: {', '.join(supported)}")],
        )


#: Beyond this an estimate says nothing (about 31 million years); it would not even fit the contract's
#: 32-character duration, and a rate close enough to zero makes it infinite.
_MAX_ESTIMATE_SECONDS = 1e15


def estimated_seconds(recipients: int, policies: Mapping[str, Any]) -> float | None:
    """Time at the configured rate; ``None`` when the rate is unlimited (then only the provider and
    the concurrency bound it, which the Service cannot predict) or so slow that the send is unbounded."""
    rate = (policies.get("rateLimit") or {}).get("permitsPerSecond")
    if not rate:
        return None
    seconds = recipients / float(rate)
    return seconds if seconds <= _MAX_ESTIMATE_SECONDS else None


async def create_run(
    uow: UnitOfWork,
    snapshot: RunSnapshot,
    *,
    now: datetime,
    reason: str | None,
    key_hash: str | None,
    confirmation: str | None = None,
) -> Run:
    """Store the PENDING run and its RUN_CREATED event. ``confirmation``: the (verified) token of a real
    send, which cannot start a second run; two starts racing with it are told apart by its unique
    digest, and the loser, run once more, is refused here."""
    digest = confirmation_digest(confirmation) if confirmation else None
    if digest is not None:
        earlier = await uow.runs.find_by_confirmation(snapshot.workspace_id, digest)
        if earlier is not None and key_hash is not None and earlier.idempotency_key_hash == key_hash:
            # This request's own first try, committed after this try looked up the key (PostgreSQL):
            # a lost race, so the caller runs again and replays the winner's answer.
            raise DuplicateResource("run", "a start with this Idempotency-Key has just committed")
        if earlier is not None:
            raise ConfirmationInvalid(f"it already started run {earlier.id}")
    run = await uow.runs.add(
        snapshot.new_run(
            created_at=now, reason=reason, idempotency_key_hash=key_hash, confirmation_digest=digest
        )
    )
    data: dict[str, Any] = {
        "trigger": run.trigger.value,
        "dryRun": run.dry_run,
        "recipientCount": run.recipient_count,
    }
    if run.source_run_id is not None:
        data["sourceRunId"] = run.source_run_id
    await uow.run_events.append(
        run.workspace_id, run.id, [RunEventDraft(type="RUN_CREATED", occurred_at=now, data=data)]
    )
    return run


def resend_states(outcomes: Collection[str]) -> tuple[ItemState, ...]:
    """The contract only admits FAILED, UNKNOWN and UNSENT; anything else is ignored, never resent."""
    states = {ItemState(o) for o in outcomes} & RESENDABLE_ITEM_STATES
    return tuple(s for s in ItemState if s in states)


async def count_items(uow: UnitOfWork, run_id: str, states: Collection[ItemState]) -> int:
    counts = await uow.run_items.count_by_state(run_id)
    return sum(counts.get(state, 0) for state in states)
