"""Starting runs of a job: the impact preview with its confirmation token, and the start transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wepush.server.application._accounts_access import ensure_workspace
from wepush.server.application._run_confirmation import CONFIRMATION_TTL, RUN_PURPOSE, run_binding
from wepush.server.application._run_context import RESOURCE, RunUseCases, missing_key
from wepush.server.application._run_errors import ConfirmationRequired
from wepush.server.application._run_start import RunStartRequest, create_run, estimated_seconds, freeze_job
from wepush.server.application._run_views import RunConfirmationView
from wepush.server.application.auth import Principal, Role
from wepush.server.application.idempotency import key_hash
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import JsonObject, Run, new_id

JOB_RESOURCE = "JOB"


class RunCreation(RunUseCases):
    async def confirm_run(
        self,
        principal: Principal,
        workspace_id: str,
        job_id: str,
        *,
        dry_run: bool = False,
        policy_overrides: dict[str, Any] | None = None,
    ) -> RunConfirmationView:
        # A refused attempt has no run yet: its event names the job it was meant to send.
        await self._authorize(
            principal,
            workspace_id,
            Role.OPERATOR,
            "run.confirm",
            resource_id=job_id,
            resource_type=JOB_RESOURCE,
        )
        now = self._deps.clock()
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            job, snapshot = await freeze_job(
                uow,
                self._deps.catalog,
                workspace_id=workspace_id,
                job_id=job_id,
                run_id=new_id(),
                dry_run=dry_run,
                overrides=policy_overrides,
            )
            account = await uow.accounts.get(workspace_id, job.account_id)
        expires_at = (now + CONFIRMATION_TTL).replace(microsecond=0)
        token = self._signer.issue(
            purpose=RUN_PURPOSE,
            workspace_id=workspace_id,
            subject_id=job_id,
            binding=run_binding(job, snapshot),
            expires_at=expires_at,
            dry_run=dry_run,
        )
        return RunConfirmationView(
            job=job,
            account_name=account.name,
            snapshot=snapshot,
            estimated_seconds=estimated_seconds(snapshot.audience.recipient_count, snapshot.policies),
            token=token,
            expires_at=expires_at,
        )

    async def start_run(
        self,
        principal: Principal,
        workspace_id: str,
        job_id: str,
        request: RunStartRequest,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[Run], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(
            principal,
            workspace_id,
            Role.OPERATOR,
            "run.start",
            resource_id=job_id,
            trace_id=trace_id,
            resource_type=JOB_RESOURCE,
        )
        if idempotency is None:
            raise missing_key()
        if not request.dry_run and not request.confirmation_token:
            raise ConfirmationRequired(
                "A real send needs the confirmationToken from POST …/run-confirmation; dry runs need none."
            )
        hashed = key_hash(idempotency.scope, idempotency.key)

        async def attempt() -> Outcome:
            now = self._deps.clock()
            async with self._deps.uow() as uow:
                await ensure_workspace(uow, principal, workspace_id)

                async def action() -> Outcome:
                    job, snapshot = await freeze_job(
                        uow,
                        self._deps.catalog,
                        workspace_id=workspace_id,
                        job_id=job_id,
                        run_id=new_id(),
                        dry_run=request.dry_run,
                        overrides=request.policy_overrides,
                    )
                    if not request.dry_run:
                        self._signer.verify(
                            request.confirmation_token or "",
                            purpose=RUN_PURPOSE,
                            workspace_id=workspace_id,
                            subject_id=job_id,
                            binding=run_binding(job, snapshot),
                            now=now,
                        )
                    run = await create_run(
                        uow,
                        snapshot,
                        now=now,
                        reason=request.reason,
                        key_hash=hashed,
                        confirmation=None if request.dry_run else request.confirmation_token,
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "run.start",
                        RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=run.id,
                        fields=["dryRun", *(["policyOverrides"] if request.policy_overrides else [])],
                        summary=f"{'Dry run' if run.dry_run else 'Run'} of job {job.id} for "
                        f"{run.recipient_count} recipient(s)",
                        trace_id=trace_id,
                    )
                    return Outcome(202, render(run), run.id)

                return await guarded(uow, idempotency, workspace_id=workspace_id, now=now, action=action)

        outcome = await once_more_on_race(idempotency, attempt)
        self._after_commit(outcome)
        return outcome
