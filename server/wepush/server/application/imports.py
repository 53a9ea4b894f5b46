"""CSV/TXT audience imports (use cases, one transaction each; the upload streams in many short ones).

An import moves CREATED → STAGING → STAGED → COMMITTED, or ends FAILED / EXPIRED. The upload claims the
import (CREATED → STAGING) before reading the body, so two uploads can never interleave; the rows are then
staged batch by batch outside any long transaction; duplicates are marked by the database; the commit
copies the accepted rows into a new immutable snapshot with one ``INSERT … SELECT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import io
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from wepush.server.application._accounts_access import authorize_audited, ensure_workspace
from wepush.server.application._deps import ServiceDeps
from wepush.server.application._import_charset import check_declared_charset
from wepush.server.application._import_coding import ContentCoding, content_coding, decoded
from wepush.server.application._import_errors import ContentRejected, ImportLimitError, UploadTooLarge
from wepush.server.application._import_receiving import (
    CREDENTIAL_LOST,
    IMPORT_SERVICE,
    STOPPED,
    AbandonedUploads,
    ServiceStopping,
    UploadAbandoned,
    UploadCredentialLost,
    UploadStop,
    UploadStopped,
    receiving,
    record_upload_failed,
)
from wepush.server.application._import_rows import MAX_RAW_CHARS
from wepush.server.application._import_settings import (
    RECEIVED_BY_KEY,
    SOURCE_COLUMNS_KEY,
    ImportSettings,
    source_columns,
)
from wepush.server.application._import_staging import StagingOutcome, stage_upload
from wepush.server.application.auth import Principal, Role
from wepush.server.application.authentication import token_roles
from wepush.server.application.authorization import authorize
from wepush.server.application.errors import AccessDenied
from wepush.server.application.idempotent import IdempotencyRequest, Outcome, guarded, once_more_on_race
from wepush.server.application.import_retention import discard_staging_in_batches
from wepush.server.domain import (
    AudienceImport,
    AudienceSnapshot,
    ImportCounts,
    ImportState,
    ImportStateConflict,
    JsonObject,
    Keyset,
    NotFound,
    Page,
    PageRequest,
    StagedRow,
    StagedRowStatus,
    UnitOfWork,
    VersionConflict,
)

__all__ = [
    "ERRORS_DOWNLOAD",
    "IMPORT_TTL",
    "PREVIEW_ROWS",
    "AbandonedUploads",
    "ErrorRowsIncomplete",
    "ImportPreview",
    "ImportService",
    "ServiceStopping",
    "staging_readable",
]

_log = logging.getLogger("wepush.server.imports")
#: Uncommitted staging data is temporary (seed: temporary exports live 24 hours).
IMPORT_TTL: Final = timedelta(hours=24)
_TTL_TEXT: Final = "24 hours"
PREVIEW_ROWS: Final = 20
ERROR_PAGE_ROWS: Final = 1000
_RESOURCE: Final = "AUDIENCE_IMPORT"
AUDIENCE_RESOURCE: Final = "AUDIENCE"
#: Downloading an import's error rows, audited like ``artifact.download``.
ERRORS_DOWNLOAD: Final = "audience_import.errors.download"
_OPEN_STATES: Final = frozenset({ImportState.CREATED, ImportState.STAGING, ImportState.STAGED})
_READABLE_STATES: Final = frozenset({ImportState.STAGED, ImportState.COMMITTED})
_DISCARDABLE_STATES: Final = frozenset({ImportState.CREATED, ImportState.STAGED})
_ERROR_STATUSES: Final = (StagedRowStatus.REJECTED, StagedRowStatus.DUPLICATE)
_MAX_FAILURE_CHARS: Final = 2000
_STILL_RECEIVING: Final = (
    "the import is receiving its file (STAGING); discard it once the upload has ended. An upload whose "
    "Service instance stopped answering is given up (FAILED) within about 6 minutes"
)
#: Seconds the FAILED record of an upload cut off by a stop may take: well within the HTTP server's
#: grace period, and what a stuck database does not record is failed at this instance's next start.
_STOP_RECORD_TIMEOUT_S: Final = 5.0
_INTERRUPTED: Final = (
    "the upload was interrupted: the Service instance receiving the file stopped before it was complete; "
    "start a new import to send the file again"
)


class ErrorRowsIncomplete(Exception):
    """Raised by an error-rows download, after its last page, when rows went missing while it ran: the
    response is already under way, so the only honest answer left is to break it off."""

    def __init__(self, import_id: str, delivered: int, expected: int) -> None:
        super().__init__(
            f"audience import {import_id}: the error rows were discarded during the download "
            f"({delivered} of {expected} delivered); staged rows are kept {_TTL_TEXT}"
        )
        self.import_id = import_id


@dataclass(frozen=True, slots=True)
class ImportPreview:
    audience_import: AudienceImport
    columns: list[str]
    accepted: list[StagedRow]
    rejected: list[StagedRow]


def _effective(audience_import: AudienceImport, now: datetime) -> AudienceImport:
    """An open import past its deadline is EXPIRED whether or not a sweeper has marked it yet."""
    if audience_import.state in _OPEN_STATES and now >= audience_import.expires_at:
        return dataclasses.replace(audience_import, state=ImportState.EXPIRED)
    return audience_import


def staging_readable(audience_import: AudienceImport, now: datetime, attempted: str) -> AudienceImport:
    """The import, if its staged rows can be read now (preview, error rows); otherwise the conflict."""
    found = _effective(audience_import, now)
    if found.state not in _READABLE_STATES:
        raise ImportStateConflict(found.id, found.state.value, attempted)
    if now >= found.expires_at:
        # The retention sweep discards staging rows at the deadline; the snapshot keeps the recipients.
        raise ImportStateConflict(
            found.id, found.state.value, f"{attempted} any more (staged rows are kept {_TTL_TEXT})"
        )
    return found


class ImportService:
    def __init__(self, deps: ServiceDeps) -> None:
        self._deps = deps
        self._stop = UploadStop()

    def stop_uploads(self) -> None:
        """The instance begins an orderly stop: uploads under way end now (their imports FAILED, their
        clients answered 503), and new ones are refused before they claim their import."""
        self._stop.stop()

    async def _import_of(
        self, uow: UnitOfWork, principal: Principal, workspace_id: str, audience_id: str, import_id: str
    ) -> AudienceImport:
        await ensure_workspace(uow, principal, workspace_id)
        await uow.audiences.get(workspace_id, audience_id)
        found = await uow.audience_imports.get(workspace_id, import_id)
        if found.audience_id != audience_id:
            raise NotFound("audience_import", import_id)
        return found

    async def create(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        settings: ImportSettings,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[AudienceImport], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="audience_import.create",
            # Refused, the import does not exist: the event names the audience it was meant for.
            resource_type=AUDIENCE_RESOURCE,
            resource_id=audience_id,
            trace_id=trace_id,
        )
        settings.validate(self._deps.import_limits)
        now = self._deps.clock()

        async def attempt() -> Outcome:
            async with self._deps.uow() as uow:

                async def create_import() -> Outcome:
                    await ensure_workspace(uow, principal, workspace_id)
                    await uow.audiences.get(workspace_id, audience_id)
                    created = await uow.audience_imports.add(
                        AudienceImport(
                            workspace_id=workspace_id,
                            audience_id=audience_id,
                            format=settings.format,
                            options=settings.to_options(),
                            expires_at=now + IMPORT_TTL,
                            created_at=now,
                            updated_at=now,
                        )
                    )
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "audience_import.create",
                        _RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=created.id,
                        fields=settings.to_options().keys(),
                        trace_id=trace_id,
                        summary=f"{settings.format.value} import for audience {audience_id}",
                    )
                    return Outcome(201, render(created), created.id)

                return await guarded(
                    uow, idempotency, workspace_id=workspace_id, now=now, action=create_import
                )

        return await once_more_on_race(idempotency, attempt)

    async def get(
        self, principal: Principal, workspace_id: str, audience_id: str, import_id: str
    ) -> AudienceImport:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="audience_import.read",
            resource_type=_RESOURCE,
            resource_id=import_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            found = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
        return _effective(found, self._deps.clock())

    async def list_page(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        page: PageRequest[Keyset],
        *,
        states: Collection[ImportState] | None = None,
    ) -> Page[AudienceImport, Keyset]:
        """The audience's imports newest first, each in the state it has now (see :func:`_effective`)."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="audience_import.list",
            resource_type=AUDIENCE_RESOURCE,
            resource_id=audience_id,
        )
        now = self._deps.clock()
        async with self._deps.uow(read_only=True) as uow:
            await ensure_workspace(uow, principal, workspace_id)
            await uow.audiences.get(workspace_id, audience_id)
            found = await uow.audience_imports.list_page(
                workspace_id, audience_id, page, now=now, states=states
            )
        return Page([_effective(item, now) for item in found.items], found.next_after)

    async def upload(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        chunks: AsyncIterator[bytes],
        *,
        content_encoding: str | None = None,
        content_type: str | None = None,
        content_length: int | None = None,
        trace_id: str | None = None,
    ) -> AudienceImport:
        """Stage the body and return the import STAGED (with counts) or FAILED (with the reason).

        ``content_encoding``: the body's HTTP ``Content-Encoding``; the file's limits apply to it once
        decompressed. An unsupported one is refused (415) while the import still waits for content, and
        so is a ``charset`` in ``content_type`` that the import's encoding does not read, and a plain body
        whose declared ``content_length`` is over the byte limit (413, before a byte is read)."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="audience_import.upload",
            resource_type=_RESOURCE,
            resource_id=import_id,
            trace_id=trace_id,
        )
        coding = content_coding(content_encoding)
        max_bytes = self._deps.import_limits.max_bytes
        if coding is ContentCoding.IDENTITY and content_length is not None and content_length > max_bytes:
            # Nothing was read: the import keeps waiting for a file that fits.
            raise UploadTooLarge(f"the file is larger than the import limit of {max_bytes} bytes")
        if self._stop.stopping:
            # Before the claim: the import still waits for its file, which another instance can take.
            raise ServiceStopping(import_id, failed=False)
        claimed = await self._claim(principal, workspace_id, audience_id, import_id, content_type)
        settings = ImportSettings.from_options(claimed.format, claimed.options)
        try:
            async with receiving(
                self._deps.uow,
                import_id,
                self._deps.clock,
                self._deps.receiving,
                credential=self._still_usable(principal, workspace_id),
            ) as lease:
                outcome = await stage_upload(
                    decoded(self._stop.watch(chunks), coding),
                    uow=self._deps.uow,
                    import_id=import_id,
                    settings=settings,
                    limits=self._deps.import_limits,
                    still_receiving=lease.check,
                )
        except UploadAbandoned:
            raise await self._given_up(claimed) from None
        except UploadStopped:
            await self._record_stopped(claimed, trace_id)
            raise ServiceStopping(import_id, failed=True) from None
        except asyncio.CancelledError:
            # Cancelled all the same (the HTTP server's grace ran out first, or it never told us of
            # the stop): the import still must not stay STAGING. Then the cancellation goes on.
            await self._record_stopped(claimed, trace_id)
            raise
        except UploadCredentialLost:
            await self._fail(claimed, principal, CREDENTIAL_LOST, trace_id)
            raise
        except ContentRejected as rejected:
            return await self._fail(claimed, principal, str(rejected), trace_id)
        except UploadTooLarge as limit:
            if coding is not ContentCoding.IDENTITY:
                limit = UploadTooLarge(f"{limit} once decompressed")
            await self._fail(claimed, principal, str(limit), trace_id)
            raise limit from None
        except ImportLimitError as limit:
            await self._fail(claimed, principal, str(limit), trace_id)
            raise
        except Exception:
            # A broken connection or a database error: the client learns nothing new from the reason.
            await self._fail(claimed, principal, "the upload did not complete", trace_id)
            raise
        try:
            return await self._mark_staged(claimed, outcome, principal, trace_id)
        except Exception:
            # The rows are staged but the import could not say so: fail it rather than leave it STAGING
            # (and impossible to upload again) until it expires. The first error is the one reported.
            with contextlib.suppress(Exception):
                await self._fail(claimed, principal, "the upload did not complete", trace_id)
            raise

    async def _record_stopped(self, claimed: AudienceImport, trace_id: str | None) -> None:
        """FAILED for an upload the instance's stop cut off, in one short transaction that a cancellation
        cannot interrupt. Its staged rows are left to the retention sweep: deleting a large file's rows
        could outlast the time the instance has left."""
        recording = asyncio.create_task(
            asyncio.wait_for(
                self._record_failed(
                    claimed, IMPORT_SERVICE, STOPPED, trace_id, summary="the upload was stopped"
                ),
                _STOP_RECORD_TIMEOUT_S,
            )
        )
        try:
            await asyncio.shield(recording)
        except VersionConflict:
            return  # another instance gave it up meanwhile: it is no longer STAGING
        except Exception as exc:
            # This instance's next start fails it instead (fail_interrupted_uploads).
            _log.warning(
                "upload %s was stopped by the Service's stop but could not be recorded FAILED: %s",
                claimed.id,
                exc.__class__.__name__,
                extra={"event": "IMPORT_UPLOAD_STOP_UNRECORDED"},
            )
            return
        _log.warning(
            "upload %s was stopped by the Service's stop; the import is FAILED",
            claimed.id,
            extra={"event": "IMPORT_UPLOAD_STOPPED"},
        )

    def _still_usable(self, principal: Principal, workspace_id: str) -> Callable[[], Awaitable[bool]]:
        """Whether the token sending a file may still send it (asked at each lease renewal): it is neither
        revoked nor expired, and still holds a role that may upload here. An upload may run for hours; a
        demotion to VIEWER or a removal from the workspace stops it as a revocation does."""

        async def usable() -> bool:
            if principal.token_id is None:
                return True  # not a token's principal (the Service's own): nothing can revoke it
            async with self._deps.uow(read_only=True) as uow:
                try:
                    token = await uow.api_tokens.get(principal.token_id)
                except NotFound:
                    return False
                if not token.is_usable(self._deps.clock()):
                    return False
                roles = await token_roles(uow, token)
            now_as = dataclasses.replace(principal, roles=roles, system_admin=token.system_admin)
            try:
                authorize(now_as, workspace_id, Role.OPERATOR)
            except (AccessDenied, NotFound):
                return False
            return True

        return usable

    async def _mark_staged(
        self, claimed: AudienceImport, outcome: StagingOutcome, principal: Principal, trace_id: str | None
    ) -> AudienceImport:
        try:
            return await self._record_staged(claimed, outcome, principal, trace_id)
        except VersionConflict:
            raise await self._given_up(claimed) from None

    async def _record_staged(
        self, claimed: AudienceImport, outcome: StagingOutcome, principal: Principal, trace_id: str | None
    ) -> AudienceImport:
        import_id, workspace_id = claimed.id, claimed.workspace_id
        async with self._deps.uow() as uow:
            # The audience may have been deleted while the file was read: then the upload fails (404)
            # rather than report rows staged for something that is gone. Held, it cannot go meanwhile.
            await uow.audiences.get(workspace_id, claimed.audience_id, referencing=True)
            duplicates = await uow.audience_imports.mark_duplicates(import_id, among=outcome.repeated_keys)
            # Every staged row was written by this upload, so its counts need no second pass.
            counts = ImportCounts(
                total_rows=outcome.rows,
                accepted_rows=outcome.rows - outcome.rejected - duplicates,
                rejected_rows=outcome.rejected,
                duplicate_rows=duplicates,
            )
            staged = await uow.audience_imports.update(
                dataclasses.replace(
                    claimed,
                    state=ImportState.STAGED,
                    counts=counts,
                    columns=outcome.fields,
                    options={**claimed.options, SOURCE_COLUMNS_KEY: outcome.source_columns},
                    receiving_until=None,
                )
            )
            await self._deps.auditor.record(
                uow,
                principal,
                "audience_import.stage",
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=import_id,
                fields=["content"],
                trace_id=trace_id,
                summary=_counts_summary(counts),
            )
        return staged

    async def _claim(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        content_type: str | None,
    ) -> AudienceImport:
        now = self._deps.clock()
        async with self._deps.uow() as uow:
            found = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
            state = _effective(found, now).state
            if state is ImportState.CREATED:
                check_declared_charset(
                    content_type, ImportSettings.from_options(found.format, found.options).encoding
                )
                try:
                    return await uow.audience_imports.update(
                        dataclasses.replace(
                            found,
                            state=ImportState.STAGING,
                            options={**found.options, RECEIVED_BY_KEY: self._deps.instance_name},
                            receiving_until=now + self._deps.receiving.lease,
                        )
                    )
                except VersionConflict:
                    # Another upload to this import claimed it first (another request, maybe on
                    # another instance): name the state it left the import in.
                    again = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
                    state = _effective(again, now).state
        raise ImportStateConflict(import_id, state.value, "accept content")

    async def _given_up(self, claimed: AudienceImport) -> ImportStateConflict:
        """For an upload whose import the Service moved on behind its back (given up as abandoned by
        another instance, or past its deadline): remove what the upload staged since, and name the state.
        Nothing else changes a STAGING import."""
        await discard_staging_in_batches(self._deps.uow, claimed.id)
        async with self._deps.uow(read_only=True) as uow:
            found = await uow.audience_imports.get(claimed.workspace_id, claimed.id)
        state = _effective(found, self._deps.clock()).state
        return ImportStateConflict(claimed.id, state.value, "accept content any more")

    async def fail_interrupted_uploads(self) -> int:
        """FAILED for every upload this instance was receiving when it last stopped; how many.

        Called at start-up, before the instance serves: an import this instance's name claimed and
        left STAGING can only belong to a process that is gone (a crash, a killed container), and would
        otherwise stay STAGING until its deadline. Other instances' uploads are left alone: they may be
        receiving right now. An import that moves on meanwhile is skipped."""
        failed = 0
        async with self._deps.uow(read_only=True) as uow:
            staging = await uow.audience_imports.staging()
        for found in staging:
            if found.options.get(RECEIVED_BY_KEY) != self._deps.instance_name:
                continue
            try:
                await self._fail(
                    found, IMPORT_SERVICE, _INTERRUPTED, None, summary="the upload was interrupted"
                )
            except ImportStateConflict:
                continue  # it moved on meanwhile
            failed += 1
        if failed:
            _log.warning(
                "%d interrupted upload(s) marked FAILED",
                failed,
                extra={"event": "IMPORT_UPLOADS_INTERRUPTED"},
            )
        return failed

    async def _fail(
        self,
        claimed: AudienceImport,
        principal: Principal,
        reason: str,
        trace_id: str | None,
        *,
        summary: str = "the upload failed",
    ) -> AudienceImport:
        # FAILED first, then the staged rows in bounded batches: a file that failed at the row limit has
        # millions of them, and one DELETE would hold SQLite's write lock past every writer's busy
        # timeout. Rows left behind by a crash in between go with the retention sweep.
        try:
            failed = await self._record_failed(claimed, principal, reason, trace_id, summary=summary)
        except VersionConflict:
            raise await self._given_up(claimed) from None
        await discard_staging_in_batches(self._deps.uow, claimed.id)
        return failed

    async def _record_failed(
        self,
        claimed: AudienceImport,
        principal: Principal,
        reason: str,
        trace_id: str | None,
        *,
        summary: str,
    ) -> AudienceImport:
        async with self._deps.uow() as uow:
            failed = await uow.audience_imports.update(
                dataclasses.replace(
                    claimed,
                    state=ImportState.FAILED,
                    counts=ImportCounts(),
                    failure_reason=reason[:_MAX_FAILURE_CHARS],
                    receiving_until=None,
                )
            )
            await record_upload_failed(
                self._deps.auditor, uow, principal, failed, summary=summary, trace_id=trace_id
            )
        return failed

    async def discard(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        *,
        trace_id: str | None = None,
    ) -> AudienceImport:
        """DISCARDED for a CREATED or STAGED import, its staged rows removed now rather than at the
        deadline. A DISCARDED import is answered as it is, after removing any rows a discard that
        stopped half-way left behind, so a retried request finishes the first one's work.

        An import being received (STAGING) is refused: its upload still writes rows and ends it. The
        update is versioned, so a commit or an upload that claims the import at the same moment either
        wins (and the discard is refused naming the state it left) or finds the import discarded."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="audience_import.discard",
            resource_type=_RESOURCE,
            resource_id=import_id,
        )
        now = self._deps.clock()
        async with self._deps.uow() as uow:
            found = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
            state = _effective(found, now).state
            if state is ImportState.DISCARDED:
                discarded = found
            elif state is ImportState.STAGING:
                raise ImportStateConflict(import_id, state.value, "be discarded", why=_STILL_RECEIVING)
            elif state not in _DISCARDABLE_STATES:
                raise ImportStateConflict(import_id, state.value, "be discarded")
            else:
                discarded = await self._mark_discarded(uow, principal, found, now, trace_id)
        # Outside the transaction, in bounded batches like a failed upload's (see ``_fail``).
        await discard_staging_in_batches(self._deps.uow, import_id)
        return discarded

    async def _mark_discarded(
        self,
        uow: UnitOfWork,
        principal: Principal,
        found: AudienceImport,
        now: datetime,
        trace_id: str | None,
    ) -> AudienceImport:
        try:
            discarded = await uow.audience_imports.update(
                dataclasses.replace(found, state=ImportState.DISCARDED)
            )
        except VersionConflict:
            again = await self._import_of(uow, principal, found.workspace_id, found.audience_id, found.id)
            raise ImportStateConflict(found.id, _effective(again, now).state.value, "be discarded") from None
        await self._deps.auditor.record(
            uow,
            principal,
            "audience_import.discard",
            _RESOURCE,
            workspace_id=found.workspace_id,
            resource_id=found.id,
            trace_id=trace_id,
        )
        return discarded

    async def preview(
        self, principal: Principal, workspace_id: str, audience_id: str, import_id: str
    ) -> ImportPreview:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action="audience_import.read",
            resource_type=_RESOURCE,
            resource_id=import_id,
        )
        async with self._deps.uow(read_only=True) as uow:
            found = await self._readable(uow, principal, workspace_id, audience_id, import_id, "preview")
            first: PageRequest[int] = PageRequest(limit=PREVIEW_ROWS)
            accepted = await uow.audience_imports.list_staged(
                import_id, first, statuses=[StagedRowStatus.ACCEPTED]
            )
            rejected = await uow.audience_imports.list_staged(import_id, first, statuses=_ERROR_STATUSES)
        shown = [_with_raw(row, found.columns) for row in rejected.items]
        return ImportPreview(found, list(source_columns(found.options)), accepted.items, shown)

    async def _readable(
        self,
        uow: UnitOfWork,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        attempted: str,
    ) -> AudienceImport:
        found = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
        return staging_readable(found, self._deps.clock(), attempted)

    async def error_rows(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        *,
        trace_id: str | None = None,
    ) -> AsyncIterator[list[StagedRow]]:
        """Check access now and audit the download (like an artifact download), then yield the rejected
        and duplicate rows page by page, each page read in a short transaction of its own (the download
        may take longer than any transaction should)."""
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.VIEWER,
            action=ERRORS_DOWNLOAD,
            resource_type=_RESOURCE,
            resource_id=import_id,
            trace_id=trace_id,
        )
        async with self._deps.uow() as uow:
            found = await self._readable(
                uow, principal, workspace_id, audience_id, import_id, "download errors"
            )
            counts = found.counts
            await self._deps.auditor.record(
                uow,
                principal,
                ERRORS_DOWNLOAD,
                _RESOURCE,
                workspace_id=workspace_id,
                resource_id=import_id,
                summary=f"error rows of audience {audience_id}: {counts.rejected_rows} rejected, "
                f"{counts.duplicate_rows} duplicate",
                trace_id=trace_id,
            )
        return self._error_pages(found, counts.rejected_rows + counts.duplicate_rows)

    async def _error_pages(self, found: AudienceImport, expected: int) -> AsyncIterator[list[StagedRow]]:
        """The error rows page by page; a download that cannot deliver all ``expected`` rows (the retention
        sweep discarded them after the deadline passed mid-download) raises instead of ending as if the
        file were complete. The counts are final once the import is STAGED, so they are the check."""
        after: int | None = None
        delivered = 0
        while True:
            async with self._deps.uow(read_only=True) as uow:
                page = await uow.audience_imports.list_staged(
                    found.id, PageRequest(limit=ERROR_PAGE_ROWS, after=after), statuses=_ERROR_STATUSES
                )
            if page.items:
                delivered += len(page.items)
                yield [_with_raw(row, found.columns) for row in page.items]
            if page.next_after is None:
                break
            after = page.next_after
        if delivered != expected:
            incomplete = ErrorRowsIncomplete(found.id, delivered, expected)
            _log.warning("%s", incomplete, extra={"event": "IMPORT_ERRORS_INCOMPLETE"})
            raise incomplete

    async def commit(
        self,
        principal: Principal,
        workspace_id: str,
        audience_id: str,
        import_id: str,
        audience_version: int,
        *,
        idempotency: IdempotencyRequest | None,
        render: Callable[[AudienceSnapshot], JsonObject],
        trace_id: str | None = None,
    ) -> Outcome:
        await authorize_audited(
            self._deps,
            principal,
            workspace_id,
            Role.OPERATOR,
            action="audience_import.commit",
            resource_type=_RESOURCE,
            resource_id=import_id,
            trace_id=trace_id,
        )
        now = self._deps.clock()

        async def attempt() -> Outcome:
            # The checksum is read on a connection of its own while the recipients are copied.
            async with self._deps.uow.reader_beside_writer() as (reader, uow):

                async def commit_import() -> Outcome:
                    found = await self._import_of(uow, principal, workspace_id, audience_id, import_id)
                    current = _effective(found, now)
                    if current.state is not ImportState.STAGED:
                        raise ImportStateConflict(import_id, current.state.value, "commit")
                    if current.counts.accepted_rows == 0:
                        # Committing would make an empty snapshot the audience's latest: a wrong file, or one
                        # every row of which was rejected, would silently leave the next Run with no one.
                        raise ImportStateConflict(
                            import_id,
                            current.state.value,
                            "commit",
                            why=f"audience import {import_id} has no accepted rows, so there is nothing to "
                            f"commit ({_counts_summary(current.counts)}; its errors say why)",
                        )
                    audience = await uow.audiences.get(workspace_id, audience_id)
                    if audience.version != audience_version:
                        raise VersionConflict(
                            "audience", audience_id, audience_version, current=audience.version
                        )
                    committed = await uow.audience_imports.commit(
                        audience, found, digest_from=None if reader is None else reader.audience_imports
                    )
                    snapshot = committed.snapshot
                    await self._deps.auditor.record(
                        uow,
                        principal,
                        "audience_import.commit",
                        _RESOURCE,
                        workspace_id=workspace_id,
                        resource_id=import_id,
                        fields=["snapshot"],
                        trace_id=trace_id,
                        summary=f"snapshot {snapshot.id} revision {snapshot.revision}: {snapshot.recipient_count} recipients",
                    )
                    return Outcome(201, render(snapshot), snapshot.id)

                return await guarded(
                    uow, idempotency, workspace_id=workspace_id, now=now, action=commit_import
                )

        return await once_more_on_race(idempotency, attempt)


def _with_raw(row: StagedRow, fields: list[str]) -> StagedRow:
    """A duplicate was staged as accepted, without its raw line (a million-row file keeps no line it
    accepted): show its imported fields in field order instead, as CSV, in preview and download alike."""
    if row.raw is not None or row.fields is None:
        return row
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow([row.fields.get(name, "") for name in fields])
    return dataclasses.replace(row, raw=buffer.getvalue()[:MAX_RAW_CHARS])


def _counts_summary(counts: ImportCounts) -> str:
    return (
        f"{counts.total_rows} rows: {counts.accepted_rows} accepted, {counts.rejected_rows} rejected, "
        f"{counts.duplicate_rows} duplicate"
    )
