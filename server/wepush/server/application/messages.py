"""Messages and their immutable revisions (use cases, one transaction each).

A message's content is never edited: a change is a new revision ``n + 1``, created only when the caller
proves it saw revision ``n`` (``basedOnRevision``). Content is checked before any transaction opens, in
the seed's order: the provider's message JSON Schema (400 VALIDATION_FAILED), then the provider's own
semantic validation (422 PROVIDER_CONFIG_INVALID).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from wepush.agent.engine import ConfigDocument
from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._accounts_schema import SchemaValidators
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._newest_first import newest_first
from wepush.server.application._unchanged import renamed_fields, unchanged
from wepush.server.application.auth import Principal, Role
from wepush.server.application.errors import (
    FieldIssue,
    ProviderConfigInvalid,
    ProviderNotAvailable,
    ValidationFailed,
)
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import (
    JsonObject,
    Keyset,
    Message,
    MessageRevision,
    Page,
    PageRequest,
    VersionConflict,
    content_hash,
    plain_numbers,
)

__all__ = ["MessageService"]

_RESOURCE: Final = "MESSAGE"
_CONTENT: Final = "/content"


class MessageService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
        self._schemas = SchemaValidators()

    def check_content(self, provider_id: str, content: JsonObject, *, chosen: bool = False) -> None:
        """Raise 503 / 400 / 422 unless ``provider_id`` is available and accepts ``content``.

        ``chosen``: the client names the provider of a new message, so an unknown id is the request's
        fault (400); for an existing message a provider gone from the catalog is 503."""
        factory = self._deps.catalog.get(provider_id)
        if factory is None and chosen:
            raise ValidationFailed(
                "The named provider is not in the catalog.",
                [FieldIssue("/providerId", "UNKNOWN_PROVIDER", "is not a provider of this Service")],
            )
        if factory is None:
            raise ProviderNotAvailable(provider_id)
        descriptor = factory.descriptor()
        issues = self._schemas.issues(
            f"{provider_id}/message", descriptor.schemas.message, content, base=_CONTENT
        )
        if issues:
            raise ValidationFailed(
                "The message content does not match the provider's message schema.", issues
            )
        document = ConfigDocument.from_json(f"{provider_id}/message", descriptor.schema_versions[-1], content)
        result = factory.validate_message(document)
        if not result.ok:
            raise ProviderConfigInvalid(
                f"The provider {provider_id} refused the message content.",
                [
                    FieldIssue(_CONTENT + issue.path, issue.code, issue.message[:1024])
                    for issue in result.issues
                ],
            )

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

    async def list(
        self,
        principal: Principal,
        workspace_id: str,
        page: PageRequest[Keyset],
        *,
        name: str | None = None,
        provider_id: str | None = None,
    ) -> Page[Message, Keyset]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "message.list")
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.messages.list_page(workspace_id, page, name=name, provider_id=provider_id)

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        name: str,
        description: str,
        provider_id: str,
        content: JsonObject,
        idempotency: IdempotencyRequest | None,
        render: Callable[[Message], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "message.create", trace_id=trace_id)
        content = plain_numbers(content)
        self.check_content(provider_id, content, chosen=True)
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def create_message() -> Outcome:
                    await ensure_workspace(uow, principal, workspace_id)
                    message = Message(
                        workspace_id=workspace_id,
                        name=name,
                        description=description,
                        provider_id=provider_id,
                        latest_revision=1,
                        created_at=now,
                        updated_at=now,
                    )
                    first = MessageRevision.of(
                        workspace_id=workspace_id, message_id=message.id, revision=1, content=content, now=now
                    )
                    await uow.messages.add(message, first)
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "message.create",
                        _RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=message.id,
                        fields=["name", "description", "providerId", "content"],
                        trace_id=trace_id,
                    )
                    return Outcome(201, render(message), message.id)

                return await guarded(
                    uow, idempotency, workspace_id=workspace_id, now=now, action=create_message
                )

        return await once_more_on_race(idempotency, attempt)

    async def get(self, principal: Principal, workspace_id: str, message_id: str) -> Message:
        """The message's metadata; ``latest_revision`` names its newest content."""
        await self._authorize(principal, workspace_id, Role.VIEWER, "message.read", message_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.messages.get(workspace_id, message_id)

    async def update(
        self,
        principal: Principal,
        workspace_id: str,
        message_id: str,
        *,
        name: str,
        description: str,
        version: int,
        trace_id: str | None = None,
    ) -> Message:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "message.update", message_id, trace_id)
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.messages.get(workspace_id, message_id)
            changed = renamed_fields(current, name=name, description=description)
            if unchanged("message", message_id, current=current.version, given=version, changed=changed):
                return current
            # The client's version, not the one just read: a stale editor must conflict.
            updated = await uow.messages.update(
                dataclasses.replace(current, name=name, description=description, version=version)
            )
            await self._deps.auditor.record(
                uow,
                principal,
                "message.update",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=message_id,
                fields=changed,
                trace_id=trace_id,
            )
            return updated

    async def delete(
        self, principal: Principal, workspace_id: str, message_id: str, *, trace_id: str | None = None
    ) -> None:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "message.delete", message_id, trace_id)
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.messages.get(workspace_id, message_id)
            await uow.messages.delete(workspace_id, message_id, current.version)
            await self._deps.auditor.record(
                uow,
                principal,
                "message.delete",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=message_id,
                trace_id=trace_id,
            )

    async def list_revisions(
        self, principal: Principal, workspace_id: str, message_id: str, page: PageRequest[int]
    ) -> Page[MessageRevision, int]:
        """Newest first; the page position is the revision the next page stays below."""
        await self._authorize(principal, workspace_id, Role.VIEWER, "message_revision.list", message_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            message = await uow.messages.get(workspace_id, message_id)
            return await newest_first(
                lambda request: uow.messages.list_revisions(workspace_id, message_id, request),
                page,
                latest=message.latest_revision,
                position=lambda revision: revision.revision,
            )

    async def create_revision(
        self,
        principal: Principal,
        workspace_id: str,
        message_id: str,
        *,
        content: JsonObject,
        based_on_revision: int,
        idempotency: IdempotencyRequest | None,
        render: Callable[[MessageRevision], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, "message_revision.create", message_id, trace_id
        )
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            provider_id = (await uow.messages.get(workspace_id, message_id)).provider_id
        # The provider of a message never changes, so the content can be checked outside the transaction.
        content = plain_numbers(content)
        self.check_content(provider_id, content)
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def create_revision() -> Outcome:
                    message = await uow.messages.get(workspace_id, message_id)
                    if message.latest_revision != based_on_revision:
                        raise VersionConflict(
                            "message",
                            message_id,
                            based_on_revision,
                            current=message.latest_revision,
                            unit="revision",
                        )
                    latest = await uow.messages.get_revision(
                        workspace_id, message_id, message.latest_revision
                    )
                    # Both sides in the integer form: a revision stored before it existed may hold 4096.0.
                    if content_hash(plain_numbers(latest.content)) == content_hash(content):
                        # Only a change of content makes a revision (seed): saving the same content again
                        # leaves the message, its version and its revisions as they are.
                        return Outcome(200, render(latest), latest.id)
                    number = message.latest_revision + 1
                    # Bumping the message first serialises concurrent editors on its version.
                    await uow.messages.update(dataclasses.replace(message, latest_revision=number))
                    revision = await uow.messages.add_revision(
                        MessageRevision.of(
                            workspace_id=workspace_id,
                            message_id=message_id,
                            revision=number,
                            content=content,
                            now=now,
                        )
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "message_revision.create",
                        "MESSAGE_REVISION",
                        workspace_id=workspace_id,
                        resource_id=revision.id,
                        fields=["content"],
                        summary=f"message {message_id} revision {number}",
                        trace_id=trace_id,
                    )
                    return Outcome(201, render(revision), revision.id)

                return await guarded(
                    uow, idempotency, workspace_id=workspace_id, now=now, action=create_revision
                )

        return await once_more_on_race(idempotency, attempt)

    async def get_revision(
        self, principal: Principal, workspace_id: str, message_id: str, revision: int
    ) -> MessageRevision:
        await self._authorize(principal, workspace_id, Role.VIEWER, "message_revision.read", message_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            await uow.messages.get(workspace_id, message_id)
            return await uow.messages.get_revision(workspace_id, message_id, revision)
