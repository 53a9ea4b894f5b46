"""Jobs (use cases, one transaction each).

A job names what to send (a message revision), to whom (an audience snapshot), through which account and
how (execution policies). Every reference must exist in the job's workspace and the account and message
must use the same provider, and every ``{{variable}}`` of the message revision must be a field of the
snapshot's recipients (otherwise each of them would fail at send time); policies are completed with the service defaults and checked by the engine's
rules. Each refusal is a 400 whose field issues point at the offending request member.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._job_policies import policies_from_request
from wepush.server.application._job_response_bodies import response_bodies_unread
from wepush.server.application._job_variables import recipient_field_groups, template_variables
from wepush.server.application._unchanged import unchanged
from wepush.server.application.auth import Principal, Role
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import (
    Account,
    AudienceSnapshot,
    Job,
    JsonObject,
    Keyset,
    Message,
    MessageRevision,
    NotFound,
    Page,
    PageRequest,
    UnitOfWork,
)

__all__ = ["JobDefinition", "JobService", "JobView"]

_RESOURCE: Final = "JOB"
#: Names listed in a field issue at most (a snapshot may have up to 200 fields).
_NAMED_AT_MOST: Final = 20
_DEFINITION_FIELDS: Final = (
    "name",
    "description",
    "account_id",
    "message_id",
    "message_revision",
    "audience_snapshot_id",
    "policies",
)
_API_NAMES: Final = {
    "account_id": "accountId",
    "message_id": "messageId",
    "message_revision": "messageRevision",
    "audience_snapshot_id": "audienceSnapshotId",
}


@dataclass(frozen=True, slots=True)
class JobDefinition:
    """The mutable fields of a job as a client sends them (``policies`` in the API's request shape)."""

    name: str
    account_id: str
    message_id: str
    message_revision: int
    audience_snapshot_id: str
    description: str = ""
    policies: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class JobView:
    """A job with the provider its account and message use."""

    job: Job
    provider_id: str


async def _found(lookup: Any, field: str, what: str, issues: list[FieldIssue]) -> Any:
    try:
        return await lookup
    except NotFound:
        issues.append(FieldIssue(field, "NOT_FOUND", f"no {what} with this id exists in the workspace"))
        return None


def _variables_missing(
    catalog: ProviderCatalog, provider_id: str, revision: MessageRevision, snapshot: AudienceSnapshot
) -> FieldIssue | None:
    """The issue of a revision that sends to, or whose placeholders name, fields the snapshot's recipients
    do not have."""
    factory = catalog.get(provider_id)
    if factory is None:
        return None  # a provider gone from the catalog is refused with 503 when a run starts
    schema = factory.descriptor().schemas.message
    have = ", ".join(snapshot.fields[:_NAMED_AT_MOST]) or "none"
    for group in recipient_field_groups(schema, revision.content):
        if any(field in snapshot.fields for _, field in group.members):
            continue
        # The provider reads the address (or another target) from this field: every recipient would fail.
        named = " or ".join(f"{field!r} ({member})" for member, field in group.members)
        return FieldIssue(
            "/audienceSnapshotId",
            "RECIPIENT_FIELD_NOT_IN_AUDIENCE",
            f"message revision {revision.revision} sends to the recipient field {named}, which the "
            f"snapshot's recipients do not have (their fields: {have})",
        )
    used = template_variables(schema, revision.content)
    missing = sorted(used - set(snapshot.fields))
    if not missing:
        return None
    named = ", ".join("{{" + name + "}}" for name in missing[:_NAMED_AT_MOST])
    return FieldIssue(
        "/audienceSnapshotId",
        "VARIABLE_NOT_IN_AUDIENCE",
        f"message revision {revision.revision} uses {named}, which the snapshot's recipients do not "
        f"have (their fields: {have})",
    )


async def _check_references(
    uow: UnitOfWork,
    workspace_id: str,
    definition: JobDefinition,
    catalog: ProviderCatalog,
    policies: JsonObject,
) -> str:
    """The provider shared by account and message, or :class:`ValidationFailed` naming every bad field."""
    issues: list[FieldIssue] = []
    account: Account | None = await _found(
        uow.accounts.get(workspace_id, definition.account_id, referencing=True),
        "/accountId",
        "account",
        issues,
    )
    message: Message | None = await _found(
        uow.messages.get(workspace_id, definition.message_id, referencing=True),
        "/messageId",
        "message",
        issues,
    )
    revision: MessageRevision | None = None
    if message is not None:
        revision = await _found(
            uow.messages.get_revision(workspace_id, message.id, definition.message_revision),
            "/messageRevision",
            "revision of this message",
            issues,
        )
    snapshot: AudienceSnapshot | None = await _found(
        uow.audiences.get_snapshot(workspace_id, definition.audience_snapshot_id, of_live_audience=True),
        "/audienceSnapshotId",
        "audience snapshot",
        issues,
    )
    if snapshot is not None:
        await _found(
            uow.audiences.get(workspace_id, snapshot.audience_id, referencing=True),
            "/audienceSnapshotId",
            "live audience",
            issues,
        )
    if account is not None and message is not None and account.provider_id != message.provider_id:
        issues.append(
            FieldIssue(
                "/messageId",
                "PROVIDER_MISMATCH",
                f"the message uses provider {message.provider_id} but the account uses {account.provider_id}",
            )
        )
    if not issues and account is not None and revision is not None and snapshot is not None:
        unknown = _variables_missing(catalog, account.provider_id, revision, snapshot)
        if unknown is not None:
            issues.append(unknown)
        unread = response_bodies_unread(catalog, account.provider_id, revision, policies)
        if unread is not None:
            issues.append(unread)
    if issues or account is None:
        raise ValidationFailed("The job's references are invalid.", issues)
    return account.provider_id


def _changed(old: Job, new: Job) -> list[str]:
    return [
        _API_NAMES.get(name, name) for name in _DEFINITION_FIELDS if getattr(old, name) != getattr(new, name)
    ]


class JobService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps

    async def _authorize(
        self,
        principal: Principal,
        workspace_id: str,
        minimum: Role,
        action: str,
        resource_id: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            minimum,
            action=action,
            resource_type=_RESOURCE,
            resource_id=resource_id,
            trace_id=trace_id,
        )

    async def _provider_of(self, uow: UnitOfWork, job: Job, cache: dict[str, str] | None = None) -> str:
        cache = {} if cache is None else cache
        if job.message_id not in cache:
            # A message cannot be deleted while a live job uses it; the account is the fallback all the same.
            try:
                cache[job.message_id] = (await uow.messages.get(job.workspace_id, job.message_id)).provider_id
            except NotFound:
                cache[job.message_id] = (await uow.accounts.get(job.workspace_id, job.account_id)).provider_id
        return cache[job.message_id]

    async def list(
        self, principal: Principal, workspace_id: str, page: PageRequest[Keyset], *, name: str | None = None
    ) -> Page[JobView, Keyset]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "job.list")
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            found = await uow.jobs.list_page(workspace_id, page, name=name)
            providers: dict[str, str] = {}
            views = [JobView(job, await self._provider_of(uow, job, providers)) for job in found.items]
        return Page(views, found.next_after)

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        definition: JobDefinition,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[JobView], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "job.create", trace_id=trace_id)
        policies = policies_from_request(definition.policies)
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def create_job() -> Outcome:
                    await ensure_workspace(uow, principal, workspace_id)
                    provider_id = await _check_references(
                        uow, workspace_id, definition, self._deps.catalog, policies
                    )
                    job = await uow.jobs.add(
                        Job(
                            workspace_id=workspace_id,
                            name=definition.name,
                            description=definition.description,
                            account_id=definition.account_id,
                            message_id=definition.message_id,
                            message_revision=definition.message_revision,
                            audience_snapshot_id=definition.audience_snapshot_id,
                            policies=policies,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "job.create",
                        _RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=job.id,
                        fields=[_API_NAMES.get(name, name) for name in _DEFINITION_FIELDS],
                        trace_id=trace_id,
                    )
                    return Outcome(201, render(JobView(job, provider_id)), job.id)

                return await guarded(uow, idempotency, workspace_id=workspace_id, now=now, action=create_job)

        return await once_more_on_race(idempotency, attempt)

    async def get(self, principal: Principal, workspace_id: str, job_id: str) -> JobView:
        await self._authorize(principal, workspace_id, Role.VIEWER, "job.read", job_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            job = await uow.jobs.get(workspace_id, job_id)
            return JobView(job, await self._provider_of(uow, job))

    async def update(
        self,
        principal: Principal,
        workspace_id: str,
        job_id: str,
        definition: JobDefinition,
        *,
        version: int,
        trace_id: str | None = None,
    ) -> JobView:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "job.update", job_id, trace_id)
        policies = policies_from_request(definition.policies)
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.jobs.get(workspace_id, job_id)
            provider_id = await _check_references(uow, workspace_id, definition, self._deps.catalog, policies)
            replacement = dataclasses.replace(
                current,
                name=definition.name,
                description=definition.description,
                account_id=definition.account_id,
                message_id=definition.message_id,
                message_revision=definition.message_revision,
                audience_snapshot_id=definition.audience_snapshot_id,
                policies=policies,
                # The client's version, not the one just read: a stale editor must conflict.
                version=version,
            )
            changed = _changed(current, replacement)
            if unchanged("job", job_id, current=current.version, given=version, changed=changed):
                return JobView(current, provider_id)
            updated = await uow.jobs.update(replacement)
            await self._deps.auditor.record(
                uow,
                principal,
                "job.update",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=job_id,
                fields=changed,
                trace_id=trace_id,
            )
            return JobView(updated, provider_id)

    async def delete(
        self, principal: Principal, workspace_id: str, job_id: str, *, trace_id: str | None = None
    ) -> None:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "job.delete", job_id, trace_id)
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.jobs.get(workspace_id, job_id)
            await uow.jobs.delete(workspace_id, job_id, current.version)
            await self._deps.auditor.record(
                uow,
                principal,
                "job.delete",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=job_id,
                trace_id=trace_id,
            )
