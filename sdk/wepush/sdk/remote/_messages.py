"""Messages of a workspace and their immutable content revisions."""

from __future__ import annotations

from collections.abc import Iterator

from wepush_client import MessagesApi
from wepush_client.models import (
    Message,
    MessageCreate,
    MessagePage,
    MessageRevision,
    MessageRevisionCreate,
    MessageRevisionPage,
    MessageUpdate,
)

from ._session import Session
from ._support import Body, WorkspaceResource, as_model, iterate_pages, new_idempotency_key

__all__ = ["MessagesClient"]


class MessagesClient(WorkspaceResource):
    """``/workspaces/{id}/messages``: returns the generated models (``Message``, ``MessageRevision`` ...)."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(MessagesApi)

    def create(self, message: Body, *, idempotency_key: str | None = None) -> Message:
        return self._api.create_message(
            self._workspace_id,
            as_model(MessageCreate, message),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get(self, message_id: str) -> Message:
        return self._api.get_message(self._workspace_id, message_id)

    def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        provider_id: str | None = None,
        name: str | None = None,
    ) -> MessagePage:
        return self._api.list_messages(
            self._workspace_id, limit=limit, cursor=cursor, provider_id=provider_id, name=name
        )

    def iterate(
        self, *, provider_id: str | None = None, name: str | None = None, page_size: int | None = None
    ) -> Iterator[Message]:
        return iterate_pages(
            lambda cursor: self.list(limit=page_size, cursor=cursor, provider_id=provider_id, name=name)
        )

    def update(self, message_id: str, update: Body) -> Message:
        """Rename or re-describe (``MessageUpdate`` with ``version``); content changes are new revisions."""
        return self._api.update_message(self._workspace_id, message_id, as_model(MessageUpdate, update))

    def delete(self, message_id: str) -> None:
        self._api.delete_message(self._workspace_id, message_id)

    def create_revision(
        self, message_id: str, revision: Body, *, idempotency_key: str | None = None
    ) -> MessageRevision:
        return self._api.create_message_revision(
            self._workspace_id,
            message_id,
            as_model(MessageRevisionCreate, revision),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get_revision(self, message_id: str, revision: int) -> MessageRevision:
        return self._api.get_message_revision(self._workspace_id, message_id, revision)

    def list_revisions(
        self, message_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> MessageRevisionPage:
        return self._api.list_message_revisions(self._workspace_id, message_id, limit=limit, cursor=cursor)

    def iterate_revisions(
        self, message_id: str, *, page_size: int | None = None
    ) -> Iterator[MessageRevision]:
        return iterate_pages(lambda cursor: self.list_revisions(message_id, limit=page_size, cursor=cursor))
