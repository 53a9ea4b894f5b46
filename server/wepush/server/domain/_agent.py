"""Agents, enrollment, leases with epochs and fencing tokens, and the Service→Agent outbox."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ._common import JsonObject, hash_token, new_id
from ._run import RunEvent


class AgentStatus(StrEnum):
    STARTING = "STARTING"
    UNREGISTERED = "UNREGISTERED"
    CONNECTING = "CONNECTING"
    ONLINE = "ONLINE"
    DRAINING = "DRAINING"
    DEGRADED = "DEGRADED"
    OFFLINE = "OFFLINE"
    STOPPED = "STOPPED"
    DISABLED = "DISABLED"


class AgentKind(StrEnum):
    EMBEDDED = "EMBEDDED"
    REMOTE = "REMOTE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """A registered agent. ``agent_version`` is its software version (``version`` is the lock)."""

    workspace_id: str
    display_name: str
    kind: AgentKind = AgentKind.REMOTE
    status: AgentStatus = AgentStatus.OFFLINE
    agent_version: str
    protocol_version: str | None = None
    platform: JsonObject = field(default_factory=dict)
    providers: list[Any] = field(default_factory=list)
    capacity: JsonObject = field(default_factory=dict)
    credential_hash: str | None = field(default=None, repr=False)
    session_public_key: str | None = field(default=None, repr=False)
    last_seen_at: datetime | None = None
    disabled_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class EnrollmentToken:
    """A one-time enrollment token; only its hash is stored."""

    workspace_id: str
    token_hash: str = field(repr=False)
    expires_at: datetime
    used_at: datetime | None = None
    created_by: str
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


class LeaseState(StrEnum):
    ACTIVE = "ACTIVE"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"
    REVOKED = "REVOKED"


class FencingToken:
    """The opaque random token that proves a write comes from the current lease holder.

    It is a secret: ``repr``/``str`` are masked and only :meth:`reveal` gives the value (once, into the
    LeaseOffer). The database stores :attr:`hash` only.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a fencing token cannot be empty")
        self._value = value

    @classmethod
    def generate(cls) -> FencingToken:
        return cls(secrets.token_urlsafe(32))

    def reveal(self) -> str:
        return self._value

    @property
    def hash(self) -> str:
        return hash_token(self._value)

    def matches(self, token_hash: str) -> bool:
        return hmac.compare_digest(self.hash, token_hash)

    def __repr__(self) -> str:
        return "FencingToken('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FencingToken) and hmac.compare_digest(self._value, other._value)

    def __hash__(self) -> int:
        return hash(self.hash)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentLease:
    """The right of one agent to execute one run for one epoch. At most one ACTIVE lease per run."""

    workspace_id: str
    run_id: str
    agent_id: str
    state: LeaseState = LeaseState.ACTIVE
    epoch: int
    fencing_token_hash: str = field(repr=False)
    expires_at: datetime
    ack_deadline: datetime
    acked_at: datetime | None = None
    last_event_sequence: int = 0
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1


@dataclass(frozen=True, slots=True)
class LeaseFence:
    """What every agent write carries: lease id, epoch and fencing token."""

    lease_id: str
    epoch: int
    token: FencingToken


@dataclass(frozen=True, slots=True)
class ClaimedLease:
    """A fresh lease and its fencing token. The token is returned here once and never stored."""

    lease: AgentLease
    token: FencingToken

    @property
    def fence(self) -> LeaseFence:
        return LeaseFence(self.lease.id, self.lease.epoch, self.token)


@dataclass(frozen=True, slots=True)
class EventBatchAck:
    """Result of an agent event batch: the last contiguous agent sequence now stored, and the events
    appended by this call (empty for a pure re-delivery). ``gap`` is true when the batch started after
    a missing sequence; the agent must resend from ``acked_sequence + 1``."""

    acked_sequence: int
    appended: list[RunEvent]
    gap: bool = False


class OutboxState(StrEnum):
    PENDING = "PENDING"
    SENT = "SENT"
    ACKED = "ACKED"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxMessage:
    """A Service→Agent message (LeaseOffer, RunCommand ...) with a per-agent monotonic sequence."""

    workspace_id: str
    agent_id: str
    sequence: int
    kind: str
    payload: JsonObject
    state: OutboxState = OutboxState.PENDING
    sent_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    id: str = field(default_factory=new_id)
    version: int = 1
