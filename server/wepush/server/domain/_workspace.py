"""Workspaces, their members and API tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ._common import new_id


class WorkspaceRole(StrEnum):
    ADMIN = "ADMIN"
    OPERATOR = "OPERATOR"
    VIEWER = "VIEWER"


@dataclass(frozen=True, slots=True, kw_only=True)
class Workspace:
    name: str
    description: str = ""
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceMember:
    workspace_id: str
    principal_id: str
    role: WorkspaceRole
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiToken:
    """Token metadata. Only ``token_hash`` is stored; the plaintext is shown once at creation."""

    workspace_id: str | None
    name: str
    token_hash: str = field(repr=False)
    token_prefix: str
    role: WorkspaceRole
    principal_id: str
    system_admin: bool = False
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1

    def is_usable(self, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at
