"""Connexion security handlers for the three schemes: user API token, agent credential, enrollment token.

They only establish *who* is calling (401 otherwise); the application layer decides what that caller may
do. There is no bypass for localhost.
"""

from __future__ import annotations

from typing import Any

from connexion.lifecycle import ConnexionRequest

from wepush.server.api._auth import PRINCIPAL_KEY
from wepush.server.api._context import SCOPE_KEY
from wepush.server.application._services import ApplicationServices
from wepush.server.application.auth import Principal


def _services(request: ConnexionRequest) -> ApplicationServices:
    services: ApplicationServices = request.scope[SCOPE_KEY]
    return services


def _sent_once(request: ConnexionRequest, header: str) -> bool:
    """A credential header may appear once: with two, a proxy in front may have judged the other one."""
    return len(request.headers.getlist(header)) == 1


def _token_info(principal: Principal | None) -> dict[str, Any] | None:
    return None if principal is None else {"sub": principal.id, PRINCIPAL_KEY: principal}


async def api_token_info(token: str, request: ConnexionRequest) -> dict[str, Any] | None:
    if not _sent_once(request, "Authorization"):
        return None
    services = _services(request)
    # Connexion splits "Bearer <token>" once and keeps trailing white space, which is no part of a field
    # value (RFC 9110 §5.5) and rides along on tokens pasted from files.
    principal = await services.auth.authenticate_api_token(token.strip(" \t"))
    if principal is not None:
        # Only a caller proven to hold the token spends its budget, so nobody can exhaust another's.
        services.budget.spend(principal.token_id or principal.id)
    return _token_info(principal)


async def agent_credential_info(api_key: str, request: ConnexionRequest) -> dict[str, Any] | None:
    if not _sent_once(request, "X-WePush-Agent-Credential"):
        return None
    return _token_info(await _services(request).auth.authenticate_agent(api_key.strip(" \t")))


async def enrollment_token_info(api_key: str, request: ConnexionRequest) -> dict[str, Any] | None:
    if not _sent_once(request, "X-WePush-Enrollment-Token"):
        return None
    return _token_info(await _services(request).auth.authenticate_enrollment(api_key.strip(" \t")))
