"""Who is calling: principals and the port that authenticates their credentials."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class Role(StrEnum):
    ADMIN = "ADMIN"
    OPERATOR = "OPERATOR"
    VIEWER = "VIEWER"


class PrincipalType(StrEnum):
    USER = "USER"
    AGENT = "AGENT"
    ENROLLMENT = "ENROLLMENT"
    SYSTEM = "SYSTEM"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. Roles are per workspace; SYSTEM_ADMIN crosses workspaces (and is audited)."""

    type: PrincipalType
    id: str
    roles: dict[str, Role] = field(default_factory=dict)
    system_admin: bool = False
    token_id: str | None = None

    def role_in(self, workspace_id: str) -> Role | None:
        return self.roles.get(workspace_id)


class Authenticator(Protocol):
    """Verifies presented credentials. Returns None for anything unknown, expired or revoked."""

    async def authenticate_api_token(self, token: str) -> Principal | None: ...

    async def authenticate_agent(self, credential: str) -> Principal | None: ...

    async def authenticate_enrollment(self, token: str) -> Principal | None: ...
