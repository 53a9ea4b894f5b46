"""API tokens of a workspace: issue (the plaintext once), list and revoke."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wepush_client import TokensApi
from wepush_client.models import ApiToken, ApiTokenCreate, ApiTokenCreated, ApiTokenPage

from ._session import Session
from ._support import Body, WorkspaceResource, as_model, iterate_pages

__all__ = ["TokensClient"]

_MASK = "***"


class _IssuedToken(ApiTokenCreated):  # type: ignore[misc]  # the generated models are untyped here
    """``ApiTokenCreated`` whose repr and str mask the plaintext: it is printed and logged far more
    often than it is meant to be read. ``.token`` (and ``to_dict()``) still give the value."""

    def __repr_name__(self) -> str:
        return "ApiTokenCreated"

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            yield name, _MASK if name == "token" else value


class TokensClient(WorkspaceResource):
    """``/workspaces/{id}/api-tokens`` (ADMIN): returns the generated models (``ApiToken``, ``ApiTokenPage``)."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session, workspace_id)
        self._api = self._generated(TokensApi)

    def create(self, token: Body) -> ApiTokenCreated:
        """Issue a token from ``ApiTokenCreate`` (``name``, ``role``, optional ``expiresAt``).

        The answer's ``token`` is the only copy of the plaintext: store it now. The operation takes no
        Idempotency-Key, so a network failure is not retried; list the tokens to see whether it was made.
        """
        created = self._api.create_api_token(self._workspace_id, as_model(ApiTokenCreate, token))
        return _IssuedToken.model_validate(created.model_dump(by_alias=True))

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> ApiTokenPage:
        """One ``ApiTokenPage`` of token metadata (never the plaintext)."""
        return self._api.list_api_tokens(self._workspace_id, limit=limit, cursor=cursor)

    def iterate(self, *, page_size: int | None = None) -> Iterator[ApiToken]:
        """Every token's metadata, fetching pages lazily."""
        return iterate_pages(lambda cursor: self.list(limit=page_size, cursor=cursor))

    def revoke(self, token_id: str) -> None:
        """Revoke a token at once; requests carrying it are refused with 401 from then on."""
        self._api.revoke_api_token(self._workspace_id, token_id)
