"""An upload's lease on its import, so that an upload whose Service instance stopped answering can be told
from one still under way.

The instance that claims an import (CREATED → STAGING) takes a lease on it and renews it while the file
arrives, whatever the client's pace. Any instance's periodic check fails a STAGING import whose lease
has run out: its receiver crashed, lost its database or was switched off and never came back, and the
import would otherwise stay STAGING (refusing a new upload and a discard) for the rest of its 24 hours.
A restart of the same instance does this at once (``ImportService.fail_interrupted_uploads``); the lease
covers the instance that does not return.

The lease is generous next to its renewal period, so clocks a little apart or a slow database do not
fail a live upload; a receiver that finds its lease gone stops reading the file and names the state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Final

from wepush.server.application.audit import Auditor
from wepush.server.application.auth import Principal, PrincipalType
from wepush.server.application.background import PassFailures, repeat_every
from wepush.server.application.import_retention import discard_staging_in_batches
from wepush.server.domain import AudienceImport, AuditOutcome, DomainError, UnitOfWork, UnitOfWorkFactory

__all__ = [
    "ABANDONED",
    "CREDENTIAL_LOST",
    "IMPORT_SERVICE",
    "STOPPED",
    "AbandonedUploads",
    "ReceivingLease",
    "ReceivingPolicy",
    "ServiceStopping",
    "UploadAbandoned",
    "UploadCredentialLost",
    "UploadStop",
    "UploadStopped",
    "receiving",
    "record_upload_failed",
]

_log = logging.getLogger("wepush.server.imports")
#: The actor of what the Service does to imports on its own.
IMPORT_SERVICE: Final = Principal(type=PrincipalType.SYSTEM, id="service")
_RESOURCE: Final = "AUDIENCE_IMPORT"
CREDENTIAL_LOST: Final = (
    "the upload was stopped: the token sending the file was revoked or expired, or lost the role that may "
    "upload in this workspace, while it was being sent"
)
ABANDONED: Final = (
    "the upload was abandoned: the Service instance receiving the file stopped answering before it was "
    "complete; start a new import to send the file again"
)

STOPPED: Final = (
    "the upload was stopped: the Service instance receiving the file was shut down before it was "
    "complete; start a new import to send the file again"
)


class UploadAbandoned(Exception):
    """The receiver's lease on the import is gone: another instance gave the upload up (or its deadline
    passed), so the rest of the file has nowhere to go."""


class UploadCredentialLost(DomainError):
    """The token sending the file was revoked (or expired) while it was being sent: the upload stops at
    the next renewal, as an event stream does at its next heartbeat, instead of running on for hours."""

    code: ClassVar[str] = "AUTHENTICATION_REQUIRED"
    status: ClassVar[int] = 401

    def __init__(self, import_id: str) -> None:
        super().__init__(CREDENTIAL_LOST)
        self.import_id = import_id


class UploadStopped(Exception):
    """Raised into the upload by :meth:`UploadStop.watch` once the instance begins an orderly stop."""


class ServiceStopping(DomainError):
    """The instance is stopping, so it took no (more of the) file: 503 with ``Retry-After``. ``failed``
    says whether the upload had begun, and the import is therefore FAILED (send the file in a new
    import), or not (the import still waits for its file: send it again, to another instance)."""

    code: ClassVar[str] = "SERVICE_NOT_READY"
    status: ClassVar[int] = 503
    retry_after_seconds: ClassVar[int] = 5

    def __init__(self, import_id: str, *, failed: bool) -> None:
        super().__init__(
            "The Service instance stopped while receiving the file; the import is FAILED. Start a new "
            "import to send the file again."
            if failed
            else "The Service instance is stopping; nothing was received. Send the file again shortly."
        )
        self.import_id = import_id
        self.failed = failed


class UploadStop:
    """The instance's orderly stop, as the uploads under way see it.

    The HTTP server gives requests still running a few seconds once it stops, then cancels them; an
    upload cancelled mid-file ends with a traceback, a plain-text 500 and its import left STAGING until
    the abandoned-upload check. Told of the stop first (:meth:`stop`), an upload stops waiting for its
    next chunk at once, so its use case can still fail the import and answer 503 within that time."""

    def __init__(self) -> None:
        self._stopping = False
        # One future for every upload to wait on beside its next chunk, made in the running loop.
        self._stopped: asyncio.Future[None] | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self) -> None:
        self._stopping = True
        if self._stopped is not None and not self._stopped.done():
            self._stopped.set_result(None)

    def _signal(self) -> asyncio.Future[None]:
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
            if self._stopping:
                self._stopped.set_result(None)
        return self._stopped

    async def watch(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """``chunks`` until the stop, then :class:`UploadStopped`, also while waiting for a slow client."""
        while True:
            following = asyncio.create_task(_next(chunks))
            try:
                await asyncio.wait((following, self._signal()), return_when=asyncio.FIRST_COMPLETED)
            finally:
                # Stopped or cancelled meanwhile: the chunk is not waited for any more.
                if not following.done():
                    following.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await following
            if self._stopping:
                if not following.cancelled():
                    following.exception()  # a chunk's error, if any, is moot: the stop ends the upload
                raise UploadStopped()
            chunk = following.result()
            if chunk is None:
                return
            yield chunk


async def _next(chunks: AsyncIterator[bytes]) -> bytes | None:
    # A task cannot end in StopAsyncIteration the way a generator does; None says the body ended.
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None


@dataclass(frozen=True, slots=True)
class ReceivingPolicy:
    lease: timedelta = timedelta(minutes=5)
    """How long an upload's import stays its receiver's without a renewal."""
    renew_every: timedelta = timedelta(minutes=1)
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    """Waits between renewals (tests pass one they control)."""


class ReceivingLease:
    """Renews one import's lease until closed; :meth:`check` raises once another instance gave it up."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        import_id: str,
        clock: Callable[[], datetime],
        policy: ReceivingPolicy,
        credential: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._uow = uow
        self._import_id = import_id
        self._clock = clock
        self._policy = policy
        self._credential = credential
        self.lost = False
        self.credential_lost = False

    def check(self) -> None:
        if self.lost:
            raise UploadAbandoned(self._import_id)
        if self.credential_lost:
            raise UploadCredentialLost(self._import_id)

    async def renew(self) -> bool:
        """Move the lease on; False (and :attr:`lost`) once the import is no longer STAGING."""
        async with self._uow() as uow:
            kept = await uow.audience_imports.renew_receiving(
                self._import_id, self._clock() + self._policy.lease
            )
        self.lost = self.lost or not kept
        return kept

    async def renew_until_lost(self) -> None:
        while True:
            await self._policy.sleep(self._policy.renew_every.total_seconds())
            try:
                if not await self.renew():
                    return
                if self._credential is not None and not await self._credential():
                    self.credential_lost = True
                    return
            except Exception:
                # The database did not answer this time; the lease leaves room for several misses.
                _log.warning(
                    "the lease on upload %s could not be renewed; retrying",
                    self._import_id,
                    extra={"event": "IMPORT_LEASE_RENEWAL_FAILED"},
                )


@contextlib.asynccontextmanager
async def receiving(
    uow: UnitOfWorkFactory,
    import_id: str,
    clock: Callable[[], datetime],
    policy: ReceivingPolicy,
    *,
    credential: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[ReceivingLease]:
    """The lease on a claimed import, renewed in the background while the block runs; at each renewal
    ``credential`` says whether the uploader may still send."""
    lease = ReceivingLease(uow, import_id, clock, policy, credential)
    renewing = asyncio.create_task(lease.renew_until_lost(), name=f"import-lease-{import_id}")
    try:
        yield lease
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing


async def record_upload_failed(
    auditor: Auditor,
    uow: UnitOfWork,
    principal: Principal,
    failed: AudienceImport,
    *,
    summary: str,
    trace_id: str | None = None,
) -> None:
    """The audit event of an upload that ended FAILED, whoever ended it."""
    await auditor.record(
        uow,
        principal,
        "audience_import.stage",
        _RESOURCE,
        workspace_id=failed.workspace_id,
        resource_id=failed.id,
        outcome=AuditOutcome.FAILED,
        fields=["content"],
        trace_id=trace_id,
        summary=summary,
    )


class AbandonedUploads:
    """Fails every STAGING import whose lease ran out, audits it and removes its staged rows."""

    def __init__(self, uow: UnitOfWorkFactory, clock: Callable[[], datetime], auditor: Auditor) -> None:
        self._uow = uow
        self._clock = clock
        self._auditor = auditor

    async def sweep(self) -> int:
        """How many uploads this pass failed. Safe beside other instances doing the same."""
        now = self._clock()
        async with self._uow(read_only=True) as uow:
            staging = await uow.audience_imports.staging()
        failed = 0
        for found in staging:
            if found.receiving_until is None or found.receiving_until >= now:
                continue
            async with self._uow() as uow:
                abandoned = await uow.audience_imports.fail_lapsed_upload(found.id, now, ABANDONED)
                if abandoned is None:
                    continue  # renewed, finished or failed meanwhile
                await record_upload_failed(
                    self._auditor, uow, IMPORT_SERVICE, abandoned, summary="the upload was abandoned"
                )
            await discard_staging_in_batches(self._uow, found.id)
            failed += 1
        if failed:
            _log.warning(
                "%d abandoned upload(s) marked FAILED", failed, extra={"event": "IMPORT_UPLOADS_ABANDONED"}
            )
        return failed

    async def run_every(self, interval: timedelta) -> None:
        """Check now and then every ``interval`` until cancelled; a failed pass is retried next time."""
        failures = PassFailures(_log, "abandoned-upload check", event="IMPORT_ABANDONED_CHECK_FAILED")
        await repeat_every(interval, self.sweep, failures)
