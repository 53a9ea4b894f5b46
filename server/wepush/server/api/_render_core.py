"""Explicit mappers from domain entities and provider descriptors to the public API's JSON bodies.

The four models stay apart: nothing here returns an entity, a row or an SPI object as is. Times are UTC
ISO-8601 with ``Z``; durations ISO-8601 (``PT30S``). Secrets appear only as ``configured``/``updatedAt``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from wepush.agent.engine import ProviderDescriptor, format_duration
from wepush.server.api._rich_text import clean_rich_text, clean_schema_texts
from wepush.server.application.accounts import AccountView, ConnectionTestOutcome
from wepush.server.application.tokens import IssuedToken, ListedToken
from wepush.server.domain import ApiToken, AuditEvent, Workspace, WorkspaceMember, WorkspaceRole

__all__ = [
    "iso",
    "render_account",
    "render_api_token",
    "render_api_token_created",
    "render_audit_event",
    "render_connection_test",
    "render_member",
    "render_provider",
    "render_provider_schemas",
    "render_workspace",
]

#: Principal types of the application → the contract's audit actor types.
_ACTOR_TYPES = {"USER": "USER", "AGENT": "AGENT", "ENROLLMENT": "AGENT", "SYSTEM": "SYSTEM"}
_CONTRACT_ACTOR_TYPES = frozenset({"USER", "API_TOKEN", "AGENT", "SCHEDULER", "SYSTEM"})


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _iso_or_none(value: datetime | None) -> str | None:
    return None if value is None else iso(value)


def render_workspace(workspace: Workspace) -> dict[str, Any]:
    return {
        "id": workspace.id,
        "name": workspace.name,
        "description": workspace.description,
        "createdAt": iso(workspace.created_at),
        "updatedAt": iso(workspace.updated_at),
        "version": workspace.version,
    }


def render_member(member: WorkspaceMember) -> dict[str, Any]:
    return {
        "userId": member.principal_id,
        "role": member.role.value,
        "createdAt": iso(member.created_at),
        "updatedAt": iso(member.updated_at),
    }


#: The contract's ``Provider.description`` maxLength.
_DESCRIPTION_CHARS = 2000


def render_provider(descriptor: ProviderDescriptor) -> dict[str, Any]:
    caps = descriptor.capabilities
    body: dict[str, Any] = {
        "id": descriptor.provider_id,
        "displayName": descriptor.display_name,
        "category": descriptor.category,
        "description": clean_rich_text(descriptor.description, _DESCRIPTION_CHARS),
        "version": descriptor.version,
        "spiVersion": descriptor.spi_version,
        "schemaVersion": descriptor.schema_versions[-1],
        "capabilities": {
            "preview": caps.preview,
            "dryRun": caps.dry_run,
            "idempotency": caps.idempotency,
            "responseBody": caps.response_body,
            "cancellation": caps.cancellation,
            "testConnection": caps.test_connection,
            "safeToRetryOnTimeout": caps.safe_to_retry_on_timeout,
        },
        "concurrencyLimit": descriptor.concurrency_limit,
        "threadSafety": descriptor.thread_safety.value,
        # The contract spells "any platform" as an empty list.
        "platforms": [p for p in descriptor.platforms if p != "any"],
    }
    if descriptor.icon:
        body["iconRef"] = descriptor.icon
    if descriptor.default_timeout is not None:
        body["defaultTimeout"] = format_duration(descriptor.default_timeout)
    return body


def render_provider_schemas(descriptor: ProviderDescriptor) -> dict[str, Any]:
    # The schemas are read-only mapping proxies: the cleaning copy is also the JSON-ready one.
    schemas = descriptor.schemas
    return {
        "providerId": descriptor.provider_id,
        "schemaVersion": descriptor.schema_versions[-1],
        "account": clean_schema_texts(schemas.account),
        "message": clean_schema_texts(schemas.message),
        "recipient": clean_schema_texts(schemas.recipient),
        "ui": clean_schema_texts(schemas.ui),
    }


def render_account(view: AccountView) -> dict[str, Any]:
    account = view.account
    return {
        "id": account.id,
        "workspaceId": account.workspace_id,
        "name": account.name,
        "description": account.description,
        "providerId": account.provider_id,
        "config": account.config,
        "secrets": {s.name: {"configured": True, "updatedAt": iso(s.updated_at)} for s in view.secrets},
        "createdAt": iso(account.created_at),
        "updatedAt": iso(account.updated_at),
        "version": account.version,
    }


def render_connection_test(outcome: ConnectionTestOutcome) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ok": outcome.ok,
        "checked": outcome.checked,
        "message": outcome.message,
        "latencyMs": outcome.latency_ms,
    }
    if outcome.category is not None:
        body["category"] = outcome.category.value
    return body


def render_listed_token(listed: ListedToken) -> dict[str, Any]:
    return render_api_token(listed.token, acting_role=listed.role)


def render_api_token(token: ApiToken, *, acting_role: WorkspaceRole | None = None) -> dict[str, Any]:
    # Neither the hash nor (after creation) the plaintext ever leaves the Service.
    return {
        "id": token.id,
        "workspaceId": token.workspace_id,
        "name": token.name,
        "role": (acting_role or token.role).value,
        "issuedRole": token.role.value,
        "systemAdmin": token.system_admin,
        "tokenPrefix": token.token_prefix,
        "createdAt": iso(token.created_at),
        "expiresAt": _iso_or_none(token.expires_at),
        "lastUsedAt": _iso_or_none(token.last_used_at),
        "revokedAt": _iso_or_none(token.revoked_at),
    }


def render_api_token_created(issued: IssuedToken) -> dict[str, Any]:
    return {**render_api_token(issued.token), "token": issued.plaintext}


def render_audit_event(event: AuditEvent) -> dict[str, Any]:
    actor_type = _ACTOR_TYPES.get(event.actor_type, event.actor_type)
    details: dict[str, Any] = {"fieldNames": [str(n) for n in event.details.get("fieldNames", [])]}
    summary = event.details.get("summary")
    if isinstance(summary, str):
        details["summary"] = summary
    return {
        "id": event.id,
        "workspaceId": event.workspace_id,
        "occurredAt": iso(event.occurred_at),
        "actor": {
            "type": actor_type if actor_type in _CONTRACT_ACTOR_TYPES else "SYSTEM",
            "id": event.actor_id,
        },
        "action": event.action,
        "resourceType": event.resource_type,
        "resourceId": event.resource_id,
        "outcome": event.outcome.value,
        "traceId": event.trace_id,
        "details": details,
    }
