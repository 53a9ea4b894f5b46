"""Runs of a workspace: start, detail, items, commands, artifacts, resend and live events."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime

from wepush_client import RunsApi
from wepush_client.models import (
    Artifact,
    ArtifactPage,
    CancelRunRequest,
    ChangeConcurrencyRequest,
    ExecutionPolicies,
    ResendConfirmation,
    ResendConfirmationRequest,
    ResendRequest,
    Run,
    RunAccepted,
    RunCommand,
    RunCommandAccepted,
    RunEventPage,
    RunItem,
    RunItemPage,
    RunPage,
    RunStart,
)

from ._events import AsyncEventSubscription, EventSubscription
from ._retry import ReconnectPolicy
from ._session import Session
from ._streams import Destination, Download, download
from ._support import Body, WorkspaceResource, as_model, iterate_pages, new_idempotency_key, utc_instant
from ._validation import build

__all__ = ["ByteRange", "RunsClient"]

#: ``(first, last)`` inclusive byte offsets (``last`` None: to the end), or ``"bytes=first-[last]"``.
ByteRange = tuple[int, int | None] | str
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def _parse_range(value: ByteRange | None) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if isinstance(value, str):
        match = _RANGE.fullmatch(value.strip())
        if match is None:
            raise ValueError("range must look like 'bytes=first-' or 'bytes=first-last'")
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None
    first, last = value
    if first < 0 or (last is not None and last < first):
        raise ValueError("range needs 0 <= first <= last")
    return first, last


class RunsClient(WorkspaceResource):
    """``/workspaces/{id}/runs``: returns the generated models (``RunAccepted``, ``Run``, ``RunItem`` ...)."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(RunsApi)

    def start(
        self,
        job_id: str,
        *,
        dry_run: bool = False,
        confirmation_token: str | None = None,
        idempotency_key: str | None = None,
        policy_overrides: Body | None = None,
        reason: str | None = None,
    ) -> RunAccepted:
        """Start a run of ``job_id``; returns ``RunAccepted`` (state PENDING) without waiting for an agent.

        A real send needs ``confirmation_token`` from ``jobs.confirm_run``. Without ``idempotency_key`` a
        fresh one is generated, so retries after a network failure never start a second run; pass your
        own key to make a start safe to repeat across processes.
        """
        body = build(
            RunStart,
            dry_run=dry_run,
            confirmation_token=confirmation_token,
            policy_overrides=None
            if policy_overrides is None
            else as_model(ExecutionPolicies, policy_overrides),
            reason=reason,
        )
        return self._api.start_run(self._workspace_id, job_id, new_idempotency_key(idempotency_key), body)

    def get(self, run_id: str) -> Run:
        """The run detail: state, counts, concurrency, snapshot, lease, artifacts and allowed commands."""
        return self._api.get_run(self._workspace_id, run_id)

    def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        state: Sequence[str] | None = None,
        job_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> RunPage:
        """One ``RunPage``, newest first; ``state`` matches any of the given RunStates.

        ``created_after`` (inclusive) and ``created_before`` must be timezone-aware datetimes (a naive one is
        refused with ``InvalidRequest``); they are sent in UTC.
        """
        return self._api.list_runs(
            self._workspace_id,
            limit=limit,
            cursor=cursor,
            state=None if state is None else [*state],
            job_id=job_id,
            created_after=utc_instant("created_after", created_after),
            created_before=utc_instant("created_before", created_before),
        )

    def iterate(
        self,
        *,
        state: Sequence[str] | None = None,
        job_id: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        page_size: int | None = None,
    ) -> Iterator[Run]:
        return iterate_pages(
            lambda cursor: self.list(
                limit=page_size,
                cursor=cursor,
                state=state,
                job_id=job_id,
                created_after=created_after,
                created_before=created_before,
            )
        )

    def list_items(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        state: Sequence[str] | None = None,
    ) -> RunItemPage:
        """One ``RunItemPage`` of item results in sequence order."""
        return self._api.list_run_items(
            self._workspace_id, run_id, limit=limit, cursor=cursor, state=None if state is None else [*state]
        )

    def items(
        self, run_id: str, *, state: Sequence[str] | None = None, page_size: int | None = None
    ) -> Iterator[RunItem]:
        """Every ``RunItem`` of the run (optionally only the given item states), fetching pages lazily."""
        return iterate_pages(
            lambda cursor: self.list_items(run_id, limit=page_size, cursor=cursor, state=state)
        )

    def pause(self, run_id: str, *, idempotency_key: str | None = None) -> RunCommandAccepted:
        """Stop dispatching new items; ``RunStateConflict`` names the allowed commands when refused."""
        return self._api.pause_run(
            self._workspace_id, run_id, idempotency_key=new_idempotency_key(idempotency_key)
        )

    def resume(self, run_id: str, *, idempotency_key: str | None = None) -> RunCommandAccepted:
        return self._api.resume_run(
            self._workspace_id, run_id, idempotency_key=new_idempotency_key(idempotency_key)
        )

    def cancel(
        self, run_id: str, *, reason: str | None = None, idempotency_key: str | None = None
    ) -> RunCommandAccepted:
        """Cancel the run; items not yet dispatched end UNSENT."""
        return self._api.cancel_run(
            self._workspace_id,
            run_id,
            idempotency_key=new_idempotency_key(idempotency_key),
            cancel_run_request=build(CancelRunRequest, reason=reason),
        )

    def change_concurrency(
        self, run_id: str, target: int, *, idempotency_key: str | None = None
    ) -> RunCommandAccepted:
        """Set the target concurrency; outside the run's range: ``ValidationFailed`` with ``allowed_range``."""
        return self._api.change_run_concurrency(
            self._workspace_id,
            run_id,
            build(ChangeConcurrencyRequest, target=target),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get_command(self, run_id: str, command_id: str) -> RunCommand:
        """A command's state: ACCEPTED → DELIVERED → APPLIED or REJECTED."""
        return self._api.get_run_command(self._workspace_id, run_id, command_id)

    def list_artifacts(
        self, run_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ArtifactPage:
        return self._api.list_run_artifacts(self._workspace_id, run_id, limit=limit, cursor=cursor)

    def artifacts(self, run_id: str, *, page_size: int | None = None) -> Iterator[Artifact]:
        return iterate_pages(lambda cursor: self.list_artifacts(run_id, limit=page_size, cursor=cursor))

    def download_artifact(
        self,
        run_id: str,
        artifact_id: str,
        dest: Destination,
        *,
        range: ByteRange | None = None,
        timeout: float | None = None,
    ) -> Download:
        """Stream an artifact (or one byte range of it) into ``dest``; resumes after a dropped connection.

        409 ARTIFACT_NOT_READY (``Conflict``) while the artifact is still being written. ``timeout``
        (seconds to wait for the answer and each further chunk) replaces the client's ``request_timeout``
        for this download.
        """
        first, last = _parse_range(range)
        return download(
            self._session,
            self._path("runs", run_id, "artifacts", artifact_id, "content"),
            dest,
            first=first,
            last=last,
            timeout=timeout,
        )

    def event_log(
        self,
        run_id: str,
        *,
        after_sequence: int | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunEventPage:
        """One ``RunEventPage`` of stored events (for clients that cannot hold an event stream open)."""
        return self._api.list_run_events(
            self._workspace_id, run_id, limit=limit, cursor=cursor, after_sequence=after_sequence
        )

    def resend_confirmation(self, run_id: str, outcomes: Sequence[str]) -> ResendConfirmation:
        """Count the source run's items with the given outcomes (FAILED, UNKNOWN, UNSENT) and get a token."""
        return self._api.create_resend_confirmation(
            self._workspace_id, run_id, build(ResendConfirmationRequest, outcomes=[*outcomes])
        )

    def resend(
        self,
        run_id: str,
        *,
        outcomes: Sequence[str],
        confirmation_token: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> RunAccepted:
        """Start a new run (``RunAccepted``) over the source run's snapshot for the confirmed items."""
        return self._api.resend_run(
            self._workspace_id,
            run_id,
            new_idempotency_key(idempotency_key),
            build(ResendRequest, outcomes=[*outcomes], confirmation_token=confirmation_token, reason=reason),
        )

    def events(
        self, run_id: str, *, last_event_id: str | None = None, reconnect: ReconnectPolicy | None = None
    ) -> EventSubscription:
        """Subscribe to the run's events (iterate it; close it or use ``with``).

        ``last_event_id`` resumes after an event seen earlier; ``CursorExpired`` means that position was
        purged, so reload the run detail with :meth:`get` instead.
        """
        return EventSubscription(
            self._session,
            self._path("runs", run_id, "events"),
            last_event_id=last_event_id,
            reconnect=reconnect or self._session.reconnect,
        )

    def events_async(
        self, run_id: str, *, last_event_id: str | None = None, reconnect: ReconnectPolicy | None = None
    ) -> AsyncEventSubscription:
        """Like :meth:`events`, for ``async for``; close with ``aclose()`` or ``async with``."""
        return AsyncEventSubscription(
            self._session,
            self._path("runs", run_id, "events"),
            last_event_id=last_event_id,
            reconnect=reconnect or self._session.reconnect,
        )
