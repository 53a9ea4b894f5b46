"""Provider accounts of a workspace: configuration plus write-only secrets."""

from __future__ import annotations

from collections.abc import Iterator

from wepush_client import AccountsApi
from wepush_client.models import (
    Account,
    AccountCreate,
    AccountPage,
    AccountUpdate,
    ConnectionTestRequest,
    ConnectionTestResult,
)

from ._session import Session
from ._support import Body, WorkspaceResource, as_model, iterate_pages, new_idempotency_key

__all__ = ["AccountsClient"]


class AccountsClient(WorkspaceResource):
    """``/workspaces/{id}/accounts``: returns the generated models (``Account``, ``AccountPage`` ...)."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(AccountsApi)

    def create(self, account: Body, *, idempotency_key: str | None = None) -> Account:
        """Create an account from an ``AccountCreate`` (or its JSON mapping); returns the ``Account``."""
        return self._api.create_account(
            self._workspace_id,
            as_model(AccountCreate, account),
            idempotency_key=new_idempotency_key(idempotency_key),
        )

    def get(self, account_id: str) -> Account:
        return self._api.get_account(self._workspace_id, account_id)

    def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        provider_id: str | None = None,
        name: str | None = None,
    ) -> AccountPage:
        """One ``AccountPage``; pass ``page.next_cursor`` back as ``cursor`` for the next one."""
        return self._api.list_accounts(
            self._workspace_id, limit=limit, cursor=cursor, provider_id=provider_id, name=name
        )

    def iterate(
        self, *, provider_id: str | None = None, name: str | None = None, page_size: int | None = None
    ) -> Iterator[Account]:
        """Every matching ``Account``, fetching pages lazily."""
        return iterate_pages(
            lambda cursor: self.list(limit=page_size, cursor=cursor, provider_id=provider_id, name=name)
        )

    def update(self, account_id: str, update: Body) -> Account:
        """Apply an ``AccountUpdate`` carrying the ``version`` read; 409 VERSION_CONFLICT when it moved on."""
        return self._api.update_account(self._workspace_id, account_id, as_model(AccountUpdate, update))

    def delete(self, account_id: str) -> None:
        self._api.delete_account(self._workspace_id, account_id)

    def test_connection(self, account_id: str, request: Body | None = None) -> ConnectionTestResult:
        """Ask the provider to check the account's configuration and secrets (``ConnectionTestResult``)."""
        body = None if request is None else as_model(ConnectionTestRequest, request)
        return self._api.test_account_connection(self._workspace_id, account_id, connection_test_request=body)
