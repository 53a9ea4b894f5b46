"""Provider accounts and their secrets (use cases, one transaction each).

Reading an account is not reading its secrets: views carry each secret's name and last change only.
Values are sealed before a transaction opens and opened again only in memory, for an explicit
connection test (or a run). Audit details name the fields that changed, never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._accounts_destination import kept_secrets_sent_elsewhere
from wepush.server.application._accounts_probe import (
    DEFAULT_TEST_TIMEOUT,
    MAX_TEST_TIMEOUT,
    ConnectionTestOutcome,
    run_connection_test,
)
from wepush.server.application._accounts_schema import SchemaValidators
from wepush.server.application._accounts_secrets import (
    ACCOUNT_OWNER,
    AccountSecretResolver,
    SecretKeep,
    SecretReplace,
    SecretWrite,
    seal_secret_writes,
)
from wepush.server.application._accounts_validation import AccountProvider, changed_paths
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._unchanged import unchanged
from wepush.server.application.auth import Principal, Role
from wepush.server.application.errors import FieldIssue, ValidationFailed
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import (
    Account,
    AuditOutcome,
    JsonObject,
    Keyset,
    Page,
    PageRequest,
    SecretRecord,
    UnitOfWork,
    VersionConflict,
    new_id,
)

__all__ = [
    "AccountDraft",
    "AccountSecretResolver",
    "AccountService",
    "AccountView",
    "ConnectionTestOutcome",
    "SecretKeep",
    "SecretReplace",
    "SecretStatus",
    "SecretWrite",
]

RESOURCE = "ACCOUNT"


@dataclass(frozen=True, slots=True)
class SecretStatus:
    name: str
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class AccountView:
    """An account as the API shows it: configuration plus the status of each secret, no values."""

    account: Account
    secrets: tuple[SecretStatus, ...]


@dataclass(frozen=True, slots=True)
class AccountDraft:
    """The mutable part of an account as a client sends it (create and full-replacement update)."""

    name: str
    config: JsonObject
    description: str = ""
    secrets: Mapping[str, SecretWrite] = field(default_factory=dict)


def _view(account: Account, records: list[SecretRecord]) -> AccountView:
    return AccountView(account, tuple(SecretStatus(r.name, r.updated_at) for r in records))


class AccountService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
        self._validators = SchemaValidators()

    async def _records(self, uow: UnitOfWork, workspace_id: str, account_id: str) -> list[SecretRecord]:
        return await uow.secret_records.list_for_owner(workspace_id, ACCOUNT_OWNER, account_id)

    def idempotency_body(self, body: Any) -> Any:
        """The request body as fingerprinted for Idempotency-Key: each secret value is replaced by its
        keyed digest, so the stored fingerprint cannot be used to guess a secret offline."""
        if not isinstance(body, dict) or not isinstance(body.get("secrets"), dict):
            return body
        secrets: dict[str, Any] = {}
        for name, write in body["secrets"].items():
            if isinstance(write, dict) and isinstance(write.get("value"), str):
                write = {**write, "value": self._deps.tokens.hash(f"account-secret:{write['value']}")}
            secrets[name] = write
        return {**body, "secrets": secrets}

    async def list_page(
        self,
        principal: Principal,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        provider_id: str | None = None,
        name: str | None = None,
    ) -> Page[AccountView, Keyset]:
        await authorize_audited(
            self._deps, principal, workspace_id, Role.VIEWER, action="account.list", resource_type=RESOURCE
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            found = await uow.accounts.list_page(workspace_id, page, name=name, provider_id=provider_id)
            views = [_view(a, await self._records(uow, workspace_id, a.id)) for a in found.items]
        return Page(views, found.next_after)

    async def get(self, principal: Principal, workspace_id: str, account_id: str) -> AccountView:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="account.read",
            resource_type=RESOURCE,
            resource_id=account_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            account = await uow.accounts.get(workspace_id, account_id)
            return _view(account, await self._records(uow, workspace_id, account_id))

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        provider_id: str,
        draft: AccountDraft,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[AccountView], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="account.create",
            resource_type=RESOURCE,
            trace_id=trace_id,
        )
        provider = AccountProvider.chosen(self._deps.catalog, provider_id)
        provider.validate(self._validators, draft.config, draft.secrets, ())
        now = self._deps.clock()
        account = Account(
            id=new_id(),
            workspace_id=workspace_id,
            name=draft.name,
            description=draft.description,
            provider_id=provider.provider_id,
            provider_version=provider.descriptor.version,
            config=draft.config,
            schema_version=provider.schema_version,
            created_at=now,
            updated_at=now,
        )
        plan = seal_secret_writes(
            self._deps.secret_store,
            workspace_id=workspace_id,
            account_id=account.id,
            writes=draft.secrets,
            existing={},
            now=now,
        )

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:
                await ensure_workspace(uow, principal, workspace_id)

                async def action() -> Outcome:
                    stored = await uow.accounts.add(account)
                    await plan.apply(uow)
                    fields = ["name", "providerId", *changed_paths({}, draft.config, "config")]
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "account.create",
                        RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=stored.id,
                        fields=[
                            *fields,
                            *(["description"] if draft.description else []),
                            *plan.changed_fields,
                        ],
                        summary=f"Account created for {provider.provider_id}; {plan.replaced_count} secret(s) set",
                        trace_id=trace_id,
                    )
                    view = _view(stored, await self._records(uow, workspace_id, stored.id))
                    return Outcome(201, render(view), stored.id)

                return await guarded(uow, idempotency, workspace_id=workspace_id, now=now, action=action)

        return await once_more_on_race(idempotency, attempt)

    async def update(
        self,
        principal: Principal,
        workspace_id: str,
        account_id: str,
        draft: AccountDraft,
        *,
        version: int,
        trace_id: str | None = None,
    ) -> AccountView:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="account.update",
            resource_type=RESOURCE,
            resource_id=account_id,
            trace_id=trace_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            current = await uow.accounts.get(workspace_id, account_id)
            records = await self._records(uow, workspace_id, account_id)
        if current.version != version:
            # Checked early so nothing is sealed for a write that cannot succeed; the UPDATE checks again.
            raise VersionConflict("account", account_id, version, current=current.version)
        provider = AccountProvider.of(self._deps.catalog, current.provider_id)
        existing = {r.name: r for r in records}
        provider.validate(self._validators, draft.config, draft.secrets, existing)
        moved = kept_secrets_sent_elsewhere(
            provider.descriptor.schemas.account, current.config, draft.config, draft.secrets
        )
        if moved:
            raise ValidationFailed(
                "An account that sends its secrets elsewhere needs them sent again.", moved
            )
        now = self._deps.clock()
        plan = seal_secret_writes(
            self._deps.secret_store,
            workspace_id=workspace_id,
            account_id=account_id,
            writes=draft.secrets,
            existing=existing,
            now=now,
        )
        changed = [
            *(["name"] if draft.name != current.name else []),
            *(["description"] if draft.description != current.description else []),
            *changed_paths(current.config, draft.config, "config"),
            *plan.changed_fields,
        ]
        if (current.provider_version, current.schema_version) != (
            provider.descriptor.version,
            provider.schema_version,
        ):
            # Saved again under a newer provider release: the account moves to it, a change of its own.
            changed.append("providerVersion")
        if unchanged("account", account_id, current=current.version, given=version, changed=changed):
            return _view(current, records)
        async with self._deps.uow() as uow:
            updated = await uow.accounts.update(
                replace(
                    current,
                    name=draft.name,
                    description=draft.description,
                    config=draft.config,
                    provider_version=provider.descriptor.version,
                    schema_version=provider.schema_version,
                    version=version,
                )
            )
            await plan.apply(uow)
            await self._deps.auditor.record(
                uow,
                principal,
                "account.update",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=account_id,
                fields=changed,
                summary=(
                    f"Account updated; {plan.replaced_count} secret(s) replaced, {len(plan.removed)} removed"
                ),
                trace_id=trace_id,
            )
            return _view(updated, await self._records(uow, workspace_id, account_id))

    async def delete(
        self, principal: Principal, workspace_id: str, account_id: str, *, trace_id: str | None = None
    ) -> None:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="account.delete",
            resource_type=RESOURCE,
            resource_id=account_id,
            trace_id=trace_id,
        )
        async with self._deps.uow() as uow:
            account = await uow.accounts.get(workspace_id, account_id)
            # Refused with RESOURCE_IN_USE while a job or run references the account.
            await uow.accounts.delete(workspace_id, account_id, account.version)
            records = await self._records(uow, workspace_id, account_id)
            for record in records:
                await uow.secret_records.delete(workspace_id, record.id, record.version)
            await self._deps.auditor.record(
                uow,
                principal,
                "account.delete",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=account_id,
                fields=[f"secrets.{r.name}" for r in records],
                summary=f"Account deleted with {len(records)} secret(s)",
                trace_id=trace_id,
            )

    async def test_connection(
        self,
        principal: Principal,
        workspace_id: str,
        account_id: str,
        *,
        timeout: timedelta | None = None,  # noqa: ASYNC109 - the provider's budget, not this call's
        trace_id: str | None = None,
    ) -> ConnectionTestOutcome:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="account.test-connection",
            resource_type=RESOURCE,
            resource_id=account_id,
            trace_id=trace_id,
        )
        if timeout is not None and not timedelta(0) < timeout <= MAX_TEST_TIMEOUT:
            raise ValidationFailed(
                "The connection test timeout is out of range.",
                [
                    FieldIssue(
                        "/timeout", "OUT_OF_RANGE", f"must be above zero and at most {MAX_TEST_TIMEOUT}"
                    )
                ],
            )
        async with self._deps.uow(read_only=True) as uow:
            account = await uow.accounts.get(workspace_id, account_id)
            records = await self._records(uow, workspace_id, account_id)
        provider = AccountProvider.of(self._deps.catalog, account.provider_id)
        # Re-checked because the provider may have changed since the account was saved.
        secrets = {r.name: SecretKeep() for r in records}
        provider.validate(self._validators, account.config, secrets, secrets)
        budget = timeout or min(provider.descriptor.default_timeout or DEFAULT_TEST_TIMEOUT, MAX_TEST_TIMEOUT)
        resolver = AccountSecretResolver(self._deps.secret_store, workspace_id, records)
        # Outside any transaction: the provider does network I/O here.
        outcome = await run_connection_test(
            provider.factory,
            provider.document(account.config, account.schema_version),
            resolver,
            budget,
            redactor=self._deps.redactor,
        )
        async with self._deps.uow() as uow:
            await self._deps.auditor.record(
                uow,
                principal,
                "account.test-connection",
                RESOURCE,
                workspace_id=workspace_id,
                resource_id=account_id,
                outcome=AuditOutcome.SUCCESS if outcome.ok else AuditOutcome.FAILED,
                summary="Connection test passed"
                if outcome.ok
                else f"Connection test failed: {outcome.category}",
                trace_id=trace_id,
            )
        return outcome
