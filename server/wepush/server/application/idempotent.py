"""Idempotency-Key handling for creating POSTs, inside the use case's own transaction.

Same key + same request → the stored response is replayed; same key + different request → 409
IDEMPOTENCY_CONFLICT. The record commits with the resource it describes, so a crash can never leave one
without the other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from wepush.server.application.idempotency import IdempotencyConflict as KeyReused
from wepush.server.application.idempotency import Replay, decide_idempotency, key_hash
from wepush.server.domain import (
    DuplicateResource,
    IdempotencyConflict,
    IdempotencyRecord,
    ImportStateConflict,
    JsonObject,
    UnitOfWork,
    VersionConflict,
)

RECORD_TTL = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class IdempotencyRequest:
    """``scope`` names the operation and its owner; ``fingerprint`` identifies the request body."""

    scope: str
    key: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Outcome:
    status: int
    body: JsonObject
    resource_id: str | None = None
    replayed: bool = False


#: How the loser of two first requests with one key fails: on the resource's unique name or the key's own
#: unique record, or on the version or state the winner changed.
_RACE_LOSSES = (DuplicateResource, IdempotencyConflict, VersionConflict, ImportStateConflict)


async def once_more_on_race(
    request: IdempotencyRequest | None, attempt: Callable[[], Awaitable[Outcome]]
) -> Outcome:
    """Run a guarded transaction, and once more if it lost a race to a request with the same key.

    Two first requests with one Idempotency-Key (a client retrying after a timeout while the first is
    still running) both find no record. The database lets one commit and makes the other wait, then fail
    (PostgreSQL; SQLite's write lock queues them, so the second simply finds the record). Run again, now
    after the winner's commit, the loser replays the winner's response; a request that differs gets the
    409, and one that failed for a reason of its own fails the same way again.
    """
    if request is None:
        return await attempt()
    try:
        return await attempt()
    except _RACE_LOSSES:
        return await attempt()


async def guarded(
    uow: UnitOfWork,
    request: IdempotencyRequest | None,
    *,
    workspace_id: str | None,
    now: datetime,
    action: Callable[[], Awaitable[Outcome]],
) -> Outcome:
    if request is None:
        return await action()
    hashed = key_hash(request.scope, request.key)
    record = await uow.idempotency.find(request.scope, hashed, now)
    try:
        decision = decide_idempotency(record, request.fingerprint)
    except KeyReused as exc:
        raise IdempotencyConflict(request.scope) from exc
    if isinstance(decision, Replay):
        body = dict(decision.body or {})
        return Outcome(decision.status, body, record.resource_id if record else None, replayed=True)
    outcome = await action()
    await uow.idempotency.save(
        IdempotencyRecord(
            workspace_id=workspace_id,
            scope=request.scope,
            key_hash=hashed,
            request_fingerprint=request.fingerprint,
            response_status=outcome.status,
            response_body=outcome.body,
            resource_id=outcome.resource_id,
            expires_at=now + RECORD_TTL,
            created_at=now,
            updated_at=now,
        )
    )
    return outcome
