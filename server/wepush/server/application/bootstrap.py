"""First-start state every Service instance agrees on: the default workspace, the server keys, and the
bootstrap admin token.

The token pepper and the cursor key must be identical on every Service instance and must never sit in
the database in plain text, so they are generated once and stored *sealed* by the secret store: the
database holds ciphertext, the master key (outside the database) opens it. Concurrent first starts race
on the unique secret record; the loser reads the winner's key.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from wepush.server.application.audit import Auditor
from wepush.server.application.auth import Principal, PrincipalType
from wepush.server.application.credentials import TokenHasher, TokenKind
from wepush.server.application.tokens import RESOURCE as TOKEN_RESOURCE
from wepush.server.domain import (
    ApiToken,
    DuplicateResource,
    NameAlreadyUsed,
    PageRequest,
    UnitOfWork,
    UnitOfWorkFactory,
    Workspace,
    WorkspaceRole,
    new_id,
)
from wepush.server.domain.secrets import SecretStore, sealed_secret_of, secret_record_of

DEFAULT_WORKSPACE_NAME = "default"
SYSTEM_OWNER_TYPE = "SYSTEM"
SYSTEM_OWNER_ID = "service"
BOOTSTRAP_PRINCIPAL = "bootstrap-admin"
_TOKEN_PEPPER: Final = "token-pepper"  # noqa: S105 - the name of a stored key, not a credential
#: The Service itself, the actor of what it does on its own at first start.
_SYSTEM: Final = Principal(type=PrincipalType.SYSTEM, id=SYSTEM_OWNER_ID)


@dataclass(frozen=True, slots=True)
class ServerKeys:
    token_pepper: bytes
    cursor_key: bytes
    confirmation_key: bytes


class SystemBootstrap:
    def __init__(
        self, uow: UnitOfWorkFactory, secret_store: SecretStore, clock: Callable[[], datetime]
    ) -> None:
        self._uow = uow
        self._secrets = secret_store
        self._clock = clock
        self._auditor = Auditor(clock)

    async def find_default_workspace(self) -> Workspace | None:
        """The workspace created at first start, found by the Service's keys it holds: an ADMIN may
        rename it (the seed keeps its real id, not its name). None before the first start."""
        async with self._uow(read_only=True) as uow:
            keys = await uow.secret_records.find_owned(SYSTEM_OWNER_TYPE, SYSTEM_OWNER_ID, _TOKEN_PEPPER)
            return None if keys is None else await uow.workspaces.get(keys.workspace_id)

    async def ensure_default_workspace(self) -> Workspace:
        keeping = await self.find_default_workspace()
        if keeping is not None:
            return keeping
        # First start (or one that stopped before its keys were stored): the name is all there is yet.
        async with self._uow(read_only=True) as uow:
            existing = await uow.workspaces.find_by_name(DEFAULT_WORKSPACE_NAME)
        if existing is not None:
            return existing
        now = self._clock()
        try:
            async with self._uow() as uow:
                return await uow.workspaces.add(
                    Workspace(
                        name=DEFAULT_WORKSPACE_NAME,
                        description="The default workspace",
                        created_at=now,
                        updated_at=now,
                    )
                )
        except (DuplicateResource, NameAlreadyUsed):
            async with self._uow(read_only=True) as uow:
                found = await uow.workspaces.find_by_name(DEFAULT_WORKSPACE_NAME)
            assert found is not None
            return found

    async def _system_key(self, workspace_id: str, name: str) -> bytes:
        async with self._uow(read_only=True) as uow:
            record = await uow.secret_records.find(workspace_id, SYSTEM_OWNER_TYPE, SYSTEM_OWNER_ID, name)
        if record is None:
            record_id = new_id()
            key = secrets.token_bytes(32)
            sealed = self._secrets.encrypt(workspace_id, record_id, name, 1, key)
            now = self._clock()
            try:
                async with self._uow() as uow:
                    await uow.secret_records.add(
                        secret_record_of(
                            sealed,
                            record_id=record_id,
                            workspace_id=workspace_id,
                            owner_type=SYSTEM_OWNER_TYPE,
                            owner_id=SYSTEM_OWNER_ID,
                            name=name,
                            record_version=1,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                return key
            except DuplicateResource:
                async with self._uow(read_only=True) as uow:
                    record = await uow.secret_records.find(
                        workspace_id, SYSTEM_OWNER_TYPE, SYSTEM_OWNER_ID, name
                    )
                assert record is not None
        plain = self._secrets.decrypt(
            sealed_secret_of(record),
            workspace_id,
            record.id,
            name,
            record.record_version,
        )
        try:
            return bytes(plain)
        finally:
            plain[:] = bytes(len(plain))

    async def server_keys(self, workspace_id: str) -> ServerKeys:
        return ServerKeys(
            token_pepper=await self._system_key(workspace_id, _TOKEN_PEPPER),
            cursor_key=await self._system_key(workspace_id, "cursor-key"),
            confirmation_key=await self._system_key(workspace_id, "confirmation-key"),
        )

    async def issue_system_admin(
        self,
        workspace_id: str,
        hasher: TokenHasher,
        deliver: Callable[[str], None],
        *,
        name: str,
        expires_at: datetime | None,
        actor: Principal,
    ) -> ApiToken:
        """Another SYSTEM_ADMIN token, for the operator at the command line (the API issues workspace
        roles only): to recover when the bootstrap token is lost, or to replace it before revoking it.

        Like the bootstrap token, it is delivered before it is committed, so a token that could not be
        written anywhere is never valid."""
        token_id = new_id()
        now = self._clock()
        async with self._uow() as uow:
            return await self._add_system_admin(
                uow,
                hasher,
                deliver,
                ApiToken(
                    id=token_id,
                    workspace_id=workspace_id,
                    name=name,
                    token_hash="",
                    token_prefix="",
                    role=WorkspaceRole.ADMIN,
                    principal_id=token_id,
                    system_admin=True,
                    expires_at=expires_at,
                    created_at=now,
                    updated_at=now,
                ),
                actor,
                "API token created with the SYSTEM_ADMIN role from the command line",
            )

    async def _add_system_admin(
        self,
        uow: UnitOfWork,
        hasher: TokenHasher,
        deliver: Callable[[str], None],
        token: ApiToken,
        actor: Principal,
        summary: str,
    ) -> ApiToken:
        """Add ``token`` with a freshly issued secret, audit it, and deliver the plaintext, all before the
        caller's transaction commits (a failed delivery rolls the token back)."""
        issued = hasher.issue(TokenKind.USER)
        stored = await uow.api_tokens.add(
            dataclasses.replace(token, token_hash=issued.hash, token_prefix=issued.prefix_hint)
        )
        await self._auditor.record(
            uow,
            actor,
            "token.create",
            TOKEN_RESOURCE,
            workspace_id=stored.workspace_id,
            resource_id=stored.id,
            fields=["name", "role", *(["expiresAt"] if stored.expires_at else [])],
            summary=summary,
        )
        deliver(issued.plaintext)
        return stored

    async def ensure_bootstrap_admin(
        self, workspace_id: str, hasher: TokenHasher, deliver: Callable[[str], None]
    ) -> bool:
        """Create the first SYSTEM_ADMIN token when the Service has no token at all.

        ``deliver`` hands the plaintext over (the Service writes it to a 0600 file) before the token is
        committed: a token that could not be delivered is rolled back, so the next start issues one
        again, instead of leaving a Service nobody can sign in to. False when tokens already exist.
        """
        async with self._uow(read_only=True) as uow:
            existing = await uow.api_tokens.list_page(workspace_id, PageRequest(limit=1))
        if existing.items:
            return False
        now = self._clock()
        async with self._uow() as uow:
            # Instances that start together on an empty database queue on the workspace row, so the
            # check below sees a token another instance committed and only one of them issues one.
            await uow.workspaces.get(workspace_id, for_membership_change=True)
            again = await uow.api_tokens.list_page(workspace_id, PageRequest(limit=1))
            if again.items:
                return False
            await self._add_system_admin(
                uow,
                hasher,
                deliver,
                ApiToken(
                    workspace_id=workspace_id,
                    name="bootstrap-admin",
                    token_hash="",
                    token_prefix="",
                    role=WorkspaceRole.ADMIN,
                    principal_id=BOOTSTRAP_PRINCIPAL,
                    system_admin=True,
                    created_at=now,
                    updated_at=now,
                ),
                _SYSTEM,
                "Bootstrap API token created with the SYSTEM_ADMIN role",
            )
        return True
