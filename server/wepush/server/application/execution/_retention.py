"""Artifact retention: expired artifacts go READY → DELETING → DELETED.

Expiry is stamped on each artifact when it is created (see ``RetentionPolicy``); pinned and legal-hold
artifacts are never claimed. The store deletion happens outside any transaction; an object that is already
gone counts as deleted, and a deletion that failed stays DELETING and is retried by the next pass, so a
pass can be repeated any number of times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from wepush.server.application.background import PassFailures, repeat_every
from wepush.server.domain import Artifact, UnitOfWorkFactory

from ._store import ArtifactStore

__all__ = ["ArtifactRetention", "RetentionReport"]

_log = logging.getLogger("wepush.server.execution")


@dataclass(frozen=True, slots=True)
class RetentionReport:
    deleted: int = 0
    """Artifacts now DELETED whose object the store removed."""
    missing: int = 0
    """Artifacts now DELETED whose object was already gone."""
    failed: int = 0
    """Deletions the store refused; they stay DELETING for the next pass."""
    abandoned_uploads: int = 0


class ArtifactRetention:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        store: ArtifactStore,
        clock: Callable[[], datetime],
        *,
        batch_size: int = 100,
        abandoned_upload_age: timedelta = timedelta(hours=24),
    ) -> None:
        self._uow = uow
        self._store = store
        self._clock = clock
        self._batch = batch_size
        self._abandoned_age = abandoned_upload_age
        # A store that refuses deletions refuses them every pass until it is back: its traceback once,
        # then a line a pass (the pass's own line counts the failures).
        self._deletions = PassFailures(_log, "artifact deletion", event="ARTIFACT_DELETE_FAILED")

    async def sweep(self) -> RetentionReport:
        deleted = missing = failed = 0
        refused: Exception | None = None
        async with self._uow() as uow:
            unfinished = await uow.artifacts.list_deleting(self._batch)
        batches = [unfinished]
        while batches:
            for artifact in batches.pop():
                outcome = await self._delete(artifact)
                if isinstance(outcome, Exception):
                    failed += 1
                    if refused is None:
                        refused = outcome
                    continue
                deleted += outcome == "deleted"
                missing += outcome == "missing"
            if refused is not None:
                # The store refuses deletions (most likely it is down): claiming more would only turn
                # more artifacts DELETING to fail the same way. The next pass tries again.
                break
            async with self._uow() as uow:
                claimed = await uow.artifacts.claim_expired(self._clock(), self._batch)
            if claimed:
                batches.append(claimed)
        if refused is not None:
            self._deletions.failed(refused, extra={"failedDeletions": failed})
        elif deleted or missing:
            self._deletions.succeeded()
        # Idle is not abandoned: a paused run's upload on another instance may be idle for days.
        async with self._uow(read_only=True) as uow:
            in_use = await uow.artifacts.keys_being_written()
        abandoned = await self._store.reclaim_abandoned(self._abandoned_age, in_use=in_use)
        return RetentionReport(deleted, missing, failed, abandoned)

    async def run_every(self, interval: timedelta) -> None:
        """Sweep now and then every ``interval`` until cancelled; a failed pass is retried next time."""
        failures = PassFailures(_log, "artifact retention", event="ARTIFACT_RETENTION_FAILED")
        await repeat_every(interval, self._pass, failures)

    async def _pass(self) -> None:
        report = await self.sweep()
        if report.deleted or report.missing or report.failed or report.abandoned_uploads:
            _log.info("artifact retention: %s", report, extra={"event": "ARTIFACT_RETENTION_PASS"})

    async def _delete(self, artifact: Artifact) -> str | Exception:
        """``"deleted"``, ``"missing"`` (already gone), or what the store refused it with: the artifact
        stays DELETING for the next pass."""
        try:
            existed = await self._store.delete(artifact.storage_key)
        except Exception as error:
            return error
        async with self._uow() as uow:
            await uow.artifacts.mark_deleted(artifact.id)
        return "deleted" if existed else "missing"
