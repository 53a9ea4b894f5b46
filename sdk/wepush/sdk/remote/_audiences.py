"""Audiences of a workspace: imports (create, upload, preview, errors, commit) and snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from wepush_client import AudiencesApi
from wepush_client.models import (
    Audience,
    AudienceCreate,
    AudienceImport,
    AudienceImportCommit,
    AudienceImportCreate,
    AudienceImportPage,
    AudienceImportPreview,
    AudiencePage,
    AudienceSnapshot,
    AudienceSnapshotPage,
    AudienceUpdate,
    Recipient,
    RecipientPage,
)

from ._session import Session
from ._streams import BinarySource, Destination, Download, download, upload
from ._support import Body, WorkspaceResource, as_model, iterate_pages, new_idempotency_key
from ._validation import build

__all__ = ["AudiencesClient"]

_MEDIA_TYPES = {"CSV": "text/csv", "TXT": "text/plain"}


class AudiencesClient(WorkspaceResource):
    """``/workspaces/{id}/audiences``: returns the generated models (``Audience``, ``AudienceImport`` ...).

    An import runs in steps: :meth:`create_import` (settings) → :meth:`upload` (the file, streamed) →
    :meth:`preview` / :meth:`download_errors` → :meth:`commit_import` (a new immutable snapshot).
    """

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(AudiencesApi)

    def create(self, audience: Body, *, idempotency_key: str | None = None) -> Audience:
        return self._api.create_audience(
            self._workspace_id,
            as_model(AudienceCreate, audience),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get(self, audience_id: str) -> Audience:
        return self._api.get_audience(self._workspace_id, audience_id)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, name: str | None = None
    ) -> AudiencePage:
        return self._api.list_audiences(self._workspace_id, limit=limit, cursor=cursor, name=name)

    def iterate(self, *, name: str | None = None, page_size: int | None = None) -> Iterator[Audience]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, name=name))

    def update(self, audience_id: str, update: Body) -> Audience:
        return self._api.update_audience(self._workspace_id, audience_id, as_model(AudienceUpdate, update))

    def delete(self, audience_id: str) -> None:
        """Refused with RESOURCE_IN_USE while a job references one of the audience's snapshots."""
        self._api.delete_audience(self._workspace_id, audience_id)

    def create_import(
        self, audience_id: str, settings: Body, *, idempotency_key: str | None = None
    ) -> AudienceImport:
        """Start an import from ``AudienceImportCreate`` settings; the import waits in state CREATED."""
        return self._api.create_audience_import(
            self._workspace_id,
            audience_id,
            as_model(AudienceImportCreate, settings),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get_import(self, audience_id: str, import_id: str) -> AudienceImport:
        return self._api.get_audience_import(self._workspace_id, audience_id, import_id)

    def list_imports(
        self,
        audience_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        state: Sequence[str] | None = None,
    ) -> AudienceImportPage:
        """One ``AudienceImportPage``, newest first; ``state`` matches any of the given states, as each
        import has it now (an open import past its deadline is EXPIRED)."""
        return self._api.list_audience_imports(
            self._workspace_id,
            audience_id,
            limit=limit,
            cursor=cursor,
            state=None if state is None else [*state],
        )

    def iterate_imports(
        self, audience_id: str, *, state: Sequence[str] | None = None, page_size: int | None = None
    ) -> Iterator[AudienceImport]:
        return iterate_pages(
            lambda cursor: self.list_imports(audience_id, limit=page_size, cursor=cursor, state=state)
        )

    def upload(
        self,
        audience_id: str,
        import_id: str,
        source: BinarySource,
        *,
        file_format: str = "CSV",
        content_encoding: str | None = None,
        timeout: float | None = None,
    ) -> AudienceImport:
        """Stream the import file (a path, bytes or a binary stream) in chunks; a path or a stream is never
        held whole in memory.

        ``file_format`` picks the media type (CSV → text/csv, TXT → text/plain) and should match the import's
        settings. ``content_encoding`` says how ``source`` is already compressed (``"gzip"`` for a
        ``.csv.gz`` file, or ``"deflate"``); the Service decompresses it and applies its limits to the file.
        Returns the ``AudienceImport`` in state STAGED (or FAILED, with counts). 429 and 503 wait for
        ``Retry-After`` and send the file again, like other calls, when it can be sent again: a path, bytes,
        or a seekable stream (rewound to where it stood). A stream that cannot rewind (a pipe) is not
        retried. No upload is retried after a network error (TransportError): read the import's state
        before uploading again.

        The Service answers once it has read and checked the whole file; ``timeout`` (seconds per read or
        write) replaces the client's ``request_timeout`` for this upload, for a file that takes longer.
        A timeout is a TransportError too, and the import may still end STAGED: read its state.
        """
        try:
            media_type = _MEDIA_TYPES[file_format.upper()]
        except KeyError:
            raise ValueError(f"file_format must be one of {sorted(_MEDIA_TYPES)}") from None
        document = upload(
            self._session,
            self._path("audiences", audience_id, "imports", import_id, "content"),
            source,
            content_type=media_type,
            content_encoding=content_encoding,
            timeout=timeout,
        )
        return AudienceImport.from_dict(document)

    def preview(self, audience_id: str, import_id: str) -> AudienceImportPreview:
        """Up to 20 accepted and 20 rejected rows (``AudienceImportPreview``)."""
        return self._api.get_audience_import_preview(self._workspace_id, audience_id, import_id)

    def download_errors(
        self, audience_id: str, import_id: str, dest: Destination, *, timeout: float | None = None
    ) -> Download:
        """Stream every rejected row as CSV into ``dest`` (a path or a writable binary stream).

        ``timeout`` (seconds to wait for the answer and each further chunk) replaces the client's
        ``request_timeout`` for this download.
        """
        return download(
            self._session,
            self._path("audiences", audience_id, "imports", import_id, "errors"),
            dest,
            accept="text/csv",
            timeout=timeout,
        )

    def commit_import(
        self,
        audience_id: str,
        import_id: str,
        *,
        version: int,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> AudienceSnapshot:
        """Commit a STAGED import as a new ``AudienceSnapshot``.

        ``version`` is the audience version the import was prepared against; 409 VERSION_CONFLICT when the
        audience changed since, IMPORT_STATE_CONFLICT when the import is not STAGED. A commit of millions
        of rows takes a while: ``timeout`` (seconds to wait for the answer) replaces the client's
        ``request_timeout`` for it. The commit carries an idempotency key, so one that timed out is sent
        again as the retry policy allows and answers with the same snapshot.
        """
        limits = self._session.timeouts.for_call(timeout)
        return self._api.commit_audience_import(
            self._workspace_id,
            audience_id,
            import_id,
            build(AudienceImportCommit, version=version),
            idempotency_key=new_idempotency_key(idempotency_key),
            _request_timeout=(limits.connect, limits.request),
        )

    def discard_import(self, audience_id: str, import_id: str) -> AudienceImport:
        """Throw away a CREATED or STAGED import and its staged rows now (state DISCARDED); 409
        IMPORT_STATE_CONFLICT for one being received or already committed. Safe to repeat."""
        return self._api.discard_audience_import(self._workspace_id, audience_id, import_id)

    def list_snapshots(
        self, audience_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> AudienceSnapshotPage:
        return self._api.list_audience_snapshots(self._workspace_id, audience_id, limit=limit, cursor=cursor)

    def iterate_snapshots(
        self, audience_id: str, *, page_size: int | None = None
    ) -> Iterator[AudienceSnapshot]:
        return iterate_pages(lambda cursor: self.list_snapshots(audience_id, limit=page_size, cursor=cursor))

    def get_snapshot(self, snapshot_id: str) -> AudienceSnapshot:
        return self._api.get_audience_snapshot(self._workspace_id, snapshot_id)

    def list_recipients(
        self, snapshot_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> RecipientPage:
        return self._api.list_audience_snapshot_recipients(
            self._workspace_id, snapshot_id, limit=limit, cursor=cursor
        )

    def iterate_recipients(self, snapshot_id: str, *, page_size: int | None = None) -> Iterator[Recipient]:
        return iterate_pages(lambda cursor: self.list_recipients(snapshot_id, limit=page_size, cursor=cursor))
