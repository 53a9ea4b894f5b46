"""Verifies presented credentials against the stored hashes (never the plaintext)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.credentials import TokenHasher, TokenKind, TokenMalformed, parse_token
from wepush.server.domain import UnitOfWorkFactory

#: ``last_used_at`` is refreshed at most this often, so authentication is not a write per request.
_TOUCH_INTERVAL = timedelta(minutes=1)


class TokenAuthenticator:
    def __init__(self, uow: UnitOfWorkFactory, hasher: TokenHasher, clock: Callable[[], datetime]) -> None:
        self._uow = uow
        self._hasher = hasher
        self._clock = clock

    @staticmethod
    def _kind_ok(token: str, kind: TokenKind) -> bool:
        try:
            parse_token(token, kind)
        except TokenMalformed:
            return False
        return True

    async def authenticate_api_token(self, token: str) -> Principal | None:
        if not self._kind_ok(token, TokenKind.USER):
            return None
        now = self._clock()
        async with self._uow(read_only=True) as uow:
            stored = await uow.api_tokens.find_by_hash(self._hasher.hash(token))
            if stored is None or not stored.is_usable(now):
                return None
            roles: dict[str, Role] = {}
            if stored.workspace_id is not None:
                roles[stored.workspace_id] = Role(stored.role.value)
            for member in await uow.workspaces.memberships_of(stored.principal_id):
                roles.setdefault(member.workspace_id, Role(member.role.value))
        if stored.last_used_at is None or now - stored.last_used_at > _TOUCH_INTERVAL:
            async with self._uow() as uow:
                await uow.api_tokens.touch(stored.id, now)
        return Principal(
            type=PrincipalType.USER,
            id=stored.principal_id,
            roles=roles,
            system_admin=stored.system_admin,
            token_id=stored.id,
        )

    async def authenticate_agent(self, credential: str) -> Principal | None:
        if not self._kind_ok(credential, TokenKind.AGENT):
            return None
        async with self._uow(read_only=True) as uow:
            agent = await uow.agents.find_by_credential_hash(self._hasher.hash(credential))
        if agent is None or agent.disabled_at is not None:
            return None
        return Principal(type=PrincipalType.AGENT, id=agent.id)

    async def authenticate_enrollment(self, token: str) -> Principal | None:
        # A one-time token is *consumed* by the enroll use case in the same transaction that creates the
        # agent; here it only has to be well formed, so nothing is written on a failed enrollment.
        if not self._kind_ok(token, TokenKind.ENROLLMENT):
            return None
        return Principal(type=PrincipalType.ENROLLMENT, id=self._hasher.hash(token))
