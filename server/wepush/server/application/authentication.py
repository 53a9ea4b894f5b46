"""Verifies presented credentials against the stored hashes (never the plaintext).

Failed authentications are made visible without letting a caller flood anything: a real token that is
revoked or expired is audited as ``token.rejected`` in its workspace (the holder had access once, and the
seed audits sign-ins and permission failures), at most once per token per minute; any other rejected
API token is a warning log line, at most one per minute with the number of rejections since the last.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from wepush.server.application.audit import Auditor
from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.credentials import TokenHasher, TokenKind, TokenMalformed, parse_token
from wepush.server.application.tokens import RESOURCE as TOKEN_RESOURCE
from wepush.server.domain import ApiToken, AuditOutcome, DatabaseBusy, UnitOfWork, UnitOfWorkFactory

#: ``last_used_at`` is refreshed at most this often, so authentication is not a write per request.
_TOUCH_INTERVAL = timedelta(minutes=1)
#: A rejected token is audited, or unknown ones logged, at most this often.
_REJECTION_INTERVAL: Final = timedelta(minutes=1)
#: Tokens whose last rejection is remembered (the oldest is forgotten first).
_REMEMBERED_REJECTIONS: Final = 1024

_log = logging.getLogger(__name__)


async def token_roles(uow: UnitOfWork, token: ApiToken) -> dict[str, Role]:
    """The roles ``token`` acts with, per workspace, as they stand now.

    A membership is the principal's role in its workspace, also in the token's own: an ADMIN who demotes
    (or promotes) a token through the members API is obeyed. The role the token was issued with applies
    where no membership says otherwise."""
    roles: dict[str, Role] = {
        member.workspace_id: Role(member.role.value)
        for member in await uow.workspaces.memberships_of(token.principal_id)
    }
    if token.workspace_id is not None:
        roles.setdefault(token.workspace_id, Role(token.role.value))
    return roles


class TokenAuthenticator:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        hasher: TokenHasher,
        clock: Callable[[], datetime],
        *,
        auditor: Auditor | None = None,
    ) -> None:
        self._uow = uow
        self._hasher = hasher
        self._clock = clock
        self._auditor = auditor or Auditor(clock)
        self._rejected_at: OrderedDict[str, datetime] = OrderedDict()
        self._unknown_since: datetime | None = None
        self._unknown = 0

    @staticmethod
    def _kind_ok(token: str, kind: TokenKind) -> bool:
        try:
            parse_token(token, kind)
        except TokenMalformed:
            return False
        return True

    async def authenticate_api_token(self, token: str) -> Principal | None:
        now = self._clock()
        if not self._kind_ok(token, TokenKind.USER):
            self._unknown_rejected(now)
            return None
        async with self._uow(read_only=True) as uow:
            stored = await uow.api_tokens.find_by_hash(self._hasher.hash(token))
            if stored is None:
                self._unknown_rejected(now)
                return None
            if not stored.is_usable(now):
                rejected = stored
            else:
                rejected = None
                roles = await token_roles(uow, stored)
        if rejected is not None:
            await self._audit_rejection(rejected, now)
            return None
        if stored.last_used_at is None or now - stored.last_used_at > _TOUCH_INTERVAL:
            try:
                async with self._uow() as uow:
                    await uow.api_tokens.touch(stored.id, now)
            except DatabaseBusy:
                # Only a hint for the token list: a read must not fail because SQLite's one writer was
                # busy for longer than its wait; the next request after the interval records it.
                _log.info(
                    "token last-used time not recorded: the database is busy",
                    extra={"event": "TOKEN_TOUCH_SKIPPED"},
                )
        return Principal(
            type=PrincipalType.USER,
            id=stored.principal_id,
            roles=roles,
            system_admin=stored.system_admin,
            token_id=stored.id,
        )

    async def _audit_rejection(self, token: ApiToken, now: datetime) -> None:
        """``token.rejected`` in the token's workspace, at most once per token per interval."""
        last = self._rejected_at.get(token.id)
        if last is not None and now - last < _REJECTION_INTERVAL:
            return
        self._rejected_at[token.id] = now
        self._rejected_at.move_to_end(token.id)
        while len(self._rejected_at) > _REMEMBERED_REJECTIONS:
            self._rejected_at.popitem(last=False)
        why = "revoked" if token.revoked_at is not None else "expired"
        holder = Principal(type=PrincipalType.USER, id=token.principal_id, system_admin=token.system_admin)
        async with self._uow() as uow:
            await self._auditor.record(
                uow,
                holder,
                "token.rejected",
                TOKEN_RESOURCE,
                workspace_id=token.workspace_id,
                resource_id=token.id,
                outcome=AuditOutcome.DENIED,
                summary=f"API token {token.name!r} ({token.token_prefix}…) was presented after it was {why}",
            )

    def _unknown_rejected(self, now: datetime) -> None:
        """A warning per interval, counting the rejections in it; the presented text is never logged."""
        self._unknown += 1
        if self._unknown_since is not None and now - self._unknown_since < _REJECTION_INTERVAL:
            return
        _log.warning(
            "%d API token(s) rejected as unknown or malformed since the last report",
            self._unknown,
            extra={"event": "AUTHENTICATION_FAILED"},
        )
        self._unknown_since = now
        self._unknown = 0

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
