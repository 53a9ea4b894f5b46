"""Jobs of a workspace, and the confirmation a real manual send needs first."""

from __future__ import annotations

from collections.abc import Iterator

from wepush_client import JobsApi, RunsApi
from wepush_client.models import (
    ExecutionPolicies,
    Job,
    JobCreate,
    JobPage,
    JobUpdate,
    RunConfirmation,
    RunConfirmationRequest,
)

from ._session import Session
from ._support import Body, WorkspaceResource, as_model, iterate_pages, new_idempotency_key
from ._validation import build

__all__ = ["JobsClient"]


class JobsClient(WorkspaceResource):
    """``/workspaces/{id}/jobs``: returns the generated models (``Job``, ``JobPage``, ``RunConfirmation``)."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(JobsApi)
        self._runs_api = self._generated(RunsApi)

    def create(self, job: Body, *, idempotency_key: str | None = None) -> Job:
        return self._api.create_job(
            self._workspace_id, as_model(JobCreate, job), idempotency_key=new_idempotency_key(idempotency_key)
        )

    def get(self, job_id: str) -> Job:
        return self._api.get_job(self._workspace_id, job_id)

    def list(
        self, *, limit: int | None = None, cursor: str | None = None, name: str | None = None
    ) -> JobPage:
        return self._api.list_jobs(self._workspace_id, limit=limit, cursor=cursor, name=name)

    def iterate(self, *, name: str | None = None, page_size: int | None = None) -> Iterator[Job]:
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor, name=name))

    def update(self, job_id: str, update: Body) -> Job:
        return self._api.update_job(self._workspace_id, job_id, as_model(JobUpdate, update))

    def delete(self, job_id: str) -> None:
        self._api.delete_job(self._workspace_id, job_id)

    def confirm_run(
        self, job_id: str, *, dry_run: bool = False, policy_overrides: Body | None = None
    ) -> RunConfirmation:
        """``POST /jobs/{id}/run-confirmation``: the impact summary and the five-minute confirmation token.

        Pass ``confirmation.confirmation_token`` to ``runs.start``; a real send without it is refused with
        CONFIRMATION_REQUIRED, and a stale one with CONFIRMATION_INVALID.
        """
        request = build(
            RunConfirmationRequest,
            dry_run=dry_run,
            policy_overrides=None
            if policy_overrides is None
            else as_model(ExecutionPolicies, policy_overrides),
        )
        return self._runs_api.create_run_confirmation(
            self._workspace_id, job_id, run_confirmation_request=request
        )
