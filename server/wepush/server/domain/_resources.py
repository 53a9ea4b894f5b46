"""Accounts, messages (with immutable revisions), jobs and schedules; and what references them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ._common import JsonObject, content_hash, new_id


class ResourceKind(StrEnum):
    """Resources whose deletion is refused while something still references them."""

    ACCOUNT = "ACCOUNT"
    MESSAGE = "MESSAGE"
    AUDIENCE = "AUDIENCE"
    AUDIENCE_SNAPSHOT = "AUDIENCE_SNAPSHOT"
    JOB = "JOB"


@dataclass(frozen=True, slots=True)
class ResourceReferences:
    """Counts of live things that point at a resource. Runs count whatever their state: a Run's
    inputs must stay readable for as long as the Run exists."""

    runs: int = 0
    jobs: int = 0
    schedules: int = 0

    @property
    def any(self) -> bool:
        return (self.runs + self.jobs + self.schedules) > 0

    def describe(self) -> str:
        parts = [
            f"{n} {kind}"
            for kind, n in (("run(s)", self.runs), ("job(s)", self.jobs), ("schedule(s)", self.schedules))
            if n
        ]
        return ", ".join(parts) or "nothing"


@dataclass(frozen=True, slots=True, kw_only=True)
class Account:
    """A provider account. ``config`` holds plain settings and SecretRefs, never secret values."""

    workspace_id: str
    name: str
    description: str = ""
    provider_id: str
    provider_version: str
    config: JsonObject
    schema_version: str
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """Message metadata; content lives in immutable :class:`MessageRevision` rows."""

    workspace_id: str
    name: str
    description: str = ""
    provider_id: str
    latest_revision: int = 1
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRevision:
    """Immutable message content; ``revision`` numbers are unique per message and start at 1."""

    workspace_id: str
    message_id: str
    revision: int
    content: JsonObject
    content_hash: str
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1

    @classmethod
    def of(
        cls, *, workspace_id: str, message_id: str, revision: int, content: JsonObject, now: datetime
    ) -> MessageRevision:
        return cls(
            workspace_id=workspace_id,
            message_id=message_id,
            revision=revision,
            content=content,
            content_hash=content_hash(content),
            created_at=now,
            updated_at=now,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """What to send (message revision), to whom (audience snapshot), through which account, how."""

    workspace_id: str
    name: str
    description: str = ""
    account_id: str
    message_id: str
    message_revision: int
    audience_snapshot_id: str
    policies: JsonObject
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    id: str = field(default_factory=new_id)
    version: int = 1


class MisfirePolicy(StrEnum):
    SKIP = "SKIP"
    FIRE_ONCE = "FIRE_ONCE"
    CATCH_UP_LIMITED = "CATCH_UP_LIMITED"


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    workspace_id: str
    job_id: str
    name: str = ""
    cron: str
    timezone: str
    enabled: bool = True
    misfire_policy: MisfirePolicy = MisfirePolicy.SKIP
    catch_up_limit: int | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    last_fire_at: datetime | None = None
    next_fire_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1
