"""Audiences and their immutable snapshots (use cases, one transaction each).

Recipients never change in place: an import commit creates the audience's next snapshot (see
:mod:`wepush.server.application.imports`). Here live the audience metadata, the snapshot listings and
the recipients page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._newest_first import newest_first
from wepush.server.application._unchanged import renamed_fields, unchanged
from wepush.server.application.auth import Principal, Role
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.domain import (
    Audience,
    AudienceSnapshot,
    JsonObject,
    Keyset,
    Page,
    PageRequest,
    Recipient,
)

__all__ = ["AudienceService"]

_RESOURCE: Final = "AUDIENCE"
SNAPSHOT_RESOURCE: Final = "AUDIENCE_SNAPSHOT"


class AudienceService:
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
        *,
        resource_type: str = _RESOURCE,
    ) -> None:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            minimum,
            action=action,
            resource_type=resource_type,
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
    ) -> Page[Audience, Keyset]:
        await self._authorize(principal, workspace_id, Role.VIEWER, "audience.list")
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.audiences.list_page(workspace_id, page, name=name)

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        *,
        name: str,
        description: str,
        idempotency: IdempotencyRequest | None,
        render: Callable[[Audience], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await self._authorize(principal, workspace_id, Role.OPERATOR, "audience.create", trace_id=trace_id)
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def create_audience() -> Outcome:
                    await ensure_workspace(uow, principal, workspace_id)
                    audience = await uow.audiences.add(
                        Audience(
                            workspace_id=workspace_id,
                            name=name,
                            description=description,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "audience.create",
                        _RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=audience.id,
                        fields=["name", "description"],
                        trace_id=trace_id,
                    )
                    return Outcome(201, render(audience), audience.id)

                return await guarded(
                    uow, idempotency, workspace_id=workspace_id, now=now, action=create_audience
                )

        return await once_more_on_race(idempotency, attempt)

    async def get(self, principal: Principal, workspace_id: str, audience_id: str) -> Audience:
        await self._authorize(principal, workspace_id, Role.VIEWER, "audience.read", audience_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.audiences.get(workspace_id, audience_id)

    async def update(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        *,
        name: str,
        description: str,
        version: int,
        trace_id: str | None = None,
    ) -> Audience:
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, "audience.update", audience_id, trace_id
        )
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.audiences.get(workspace_id, audience_id)
            changed = renamed_fields(current, name=name, description=description)
            if unchanged("audience", audience_id, current=current.version, given=version, changed=changed):
                return current
            # The client's version, not the one just read: a stale editor must conflict.
            updated = await uow.audiences.update(
                dataclasses.replace(current, name=name, description=description, version=version)
            )
            await self._deps.auditor.record(
                uow,
                principal,
                "audience.update",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=audience_id,
                fields=changed,
                trace_id=trace_id,
            )
            return updated

    async def delete(
        self, principal: Principal, workspace_id: str, audience_id: str, *, trace_id: str | None = None
    ) -> None:
        await self._authorize(
            principal, workspace_id, Role.OPERATOR, "audience.delete", audience_id, trace_id
        )
        async with self._deps.uow() as uow:
            await ensure_workspace(uow, principal, workspace_id)
            current = await uow.audiences.get(workspace_id, audience_id)
            await uow.audiences.delete(workspace_id, audience_id, current.version)
            await self._deps.auditor.record(
                uow,
                principal,
                "audience.delete",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=audience_id,
                trace_id=trace_id,
            )

    async def list_snapshots(
        self, principal: Principal, workspace_id: str, audience_id: str, page: PageRequest[int]
    ) -> Page[AudienceSnapshot, int]:
        """Newest first; the page position is the revision the next page stays below."""
        await self._authorize(principal, workspace_id, Role.VIEWER, "audience_snapshot.list", audience_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            audience = await uow.audiences.get(workspace_id, audience_id)
            return await newest_first(
                lambda request: uow.audiences.list_snapshots(workspace_id, audience_id, request),
                page,
                latest=audience.latest_revision,
                position=lambda snapshot: snapshot.revision,
            )

    async def _authorize_snapshot_read(
        self, principal: Principal, workspace_id: str, snapshot_id: str
    ) -> None:
        await self._authorize(
            principal,
            workspace_id,
            Role.VIEWER,
            "audience_snapshot.read",
            snapshot_id,
            resource_type=SNAPSHOT_RESOURCE,
        )

    async def get_snapshot(
        self, principal: Principal, workspace_id: str, snapshot_id: str
    ) -> AudienceSnapshot:
        await self._authorize_snapshot_read(principal, workspace_id, snapshot_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            return await uow.audiences.get_snapshot(workspace_id, snapshot_id, of_live_audience=True)

    async def list_recipients(
        self, principal: Principal, workspace_id: str, snapshot_id: str, page: PageRequest[int]
    ) -> Page[Recipient, int]:
        await self._authorize_snapshot_read(principal, workspace_id, snapshot_id)
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            # The snapshot lookup is what scopes the recipients to the caller's workspace.
            await uow.audiences.get_snapshot(workspace_id, snapshot_id, of_live_audience=True)
            return await uow.audiences.list_recipients(snapshot_id, page)
