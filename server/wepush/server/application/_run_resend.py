"""Resending the FAILED, UNKNOWN or UNSENT items of a finished run as a new run (seed: run_retry_item).

The confirmation counts the matching items and signs the count; the resend re-counts inside its
transaction, so a token for another selection (or a changed count) is refused. The new run copies the
source run's frozen snapshot, never the current resources, and its retry set is built with one
``INSERT … SELECT``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from wepush.server.application._run_confirmation import CONFIRMATION_TTL, RESEND_PURPOSE, resend_binding
from wepush.server.application._run_context import RESOURCE, RunUseCases, missing_key
from wepush.server.application._run_errors import SecretsReplacedSinceRun
from wepush.server.application._run_start import check_provider, count_items, create_run, resend_states
from wepush.server.application._run_views import ResendConfirmationView
from wepush.server.application.auth import Principal, Role
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.execution import ACCOUNT_SECRET_OWNER, RunSnapshot, resend_snapshot
from wepush.server.application.idempotency import key_hash
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import JsonObject, Run, RunStateConflict, UnitOfWork, allowed_commands, new_id


async def _secrets_unchanged(uow: UnitOfWork, source: Run, snapshot: RunSnapshot) -> None:
    """Every secret the source run froze is still the record it froze (the store keeps the latest only)."""
    frozen = snapshot.account.secret_versions
    if not frozen:
        return
    records = await uow.secret_records.list_for_owner(
        source.workspace_id, ACCOUNT_SECRET_OWNER, snapshot.account.id
    )
    current = {record.name: record.record_version for record in records}
    replaced = sorted(name for name, version in frozen.items() if current.get(name) != version)
    if replaced:
        raise SecretsReplacedSinceRun(source.id, snapshot.account.id, replaced)


class RunResends(RunUseCases):
    @staticmethod
    def _finished(run: Run) -> None:
        if not run.state.is_terminal:
            raise RunStateConflict(run.id, run.state, "resend items", allowed_commands(run.state))

    async def confirm_resend(
        self, principal: Principal, workspace_id: str, run_id: str, outcomes: Sequence[str]
    ) -> ResendConfirmationView:
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, "run.resend.confirm", resource_id=run_id
        )
        states = resend_states(outcomes)
        now = self._deps.clock()
        async with self._deps.uow(read_only=True) as uow:
            run = await uow.runs.get(workspace_id, run_id)
            self._finished(run)
            await _secrets_unchanged(uow, run, RunSnapshot.from_json(run.snapshot))
            matching = await count_items(uow, run_id, states)
        expires_at = (now + CONFIRMATION_TTL).replace(microsecond=0)
        token = self._signer.issue(
            purpose=RESEND_PURPOSE,
            workspace_id=workspace_id,
            subject_id=run_id,
            binding=resend_binding(run_id, states, matching),
            expires_at=expires_at,
        )
        return ResendConfirmationView(run_id, states, matching, token, expires_at)

    async def resend(
        self,
        principal: Principal,
        workspace_id: str,
        run_id: str,
        outcomes: Sequence[str],
        confirmation_token: str,
        *,
        reason: str | None,
        idempotency: IdempotencyRequest | None,
        render: Callable[[Run], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, "run.resend", resource_id=run_id, trace_id=trace_id
        )
        if idempotency is None:
            raise missing_key()
        states = resend_states(outcomes)
        hashed = key_hash(idempotency.scope, idempotency.key)

        async def attempt() -> Outcome:
            now = self._deps.clock()
            async with self._deps.uow() as uow:

                async def action() -> Outcome:
                    source = await uow.runs.get(workspace_id, run_id)
                    self._finished(source)
                    matching = await count_items(uow, run_id, states)
                    self._signer.verify(
                        confirmation_token,
                        purpose=RESEND_PURPOSE,
                        workspace_id=workspace_id,
                        subject_id=run_id,
                        binding=resend_binding(run_id, states, matching),
                        now=now,
                    )
                    if matching == 0:
                        raise ValidationFailed(
                            "No item of the run has one of these outcomes.",
                            [FieldIssue("/outcomes", "NO_MATCHING_ITEMS", "nothing to resend")],
                        )
                    frozen = RunSnapshot.from_json(source.snapshot)
                    await _secrets_unchanged(uow, source, frozen)
                    snapshot = resend_snapshot(
                        frozen,
                        run_id=new_id(),
                        outcomes=states,
                        recipient_count=matching,
                    )
                    check_provider(self._deps.catalog, snapshot)
                    run = await create_run(
                        uow,
                        snapshot,
                        now=now,
                        reason=reason,
                        key_hash=hashed,
                        confirmation=confirmation_token,
                    )
                    await uow.run_items.create_retry_set(run.id, run_id, states)
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "run.resend",
                        RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=run.id,
                        fields=["outcomes"],
                        summary=f"Resend of {matching} item(s) of run {run_id}",
                        trace_id=trace_id,
                    )
                    return Outcome(202, render(run), run.id)

                return await guarded(uow, idempotency, workspace_id=workspace_id, now=now, action=action)

        outcome = await once_more_on_race(idempotency, attempt)
        self._after_commit(outcome)
        return outcome
