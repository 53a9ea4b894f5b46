"""The basic scope check before a request is validated, for the requests that never reach a use case.

Connexion validates parameters and bodies before the handler runs, and the handler's use case is where
the final authorization (and its audit) happens. Two kinds of request were therefore answered without
looking at who sent them: a malformed one (400: a VIEWER learnt the validation rules of an operation it
may not call, and the attempt left no trace) and one for an operation not implemented yet (501). For
those two, this middleware asks the application's :class:`ScopeCheck` first, with the role the contract
declares for the operation (``x-wepush-min-role``): a caller below it gets 403, one outside the workspace
404, and the refusal is audited. A well-formed request to an implemented operation goes on untouched, and
its use case authorizes and audits it as before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from connexion.exceptions import BadRequestProblem, UnsupportedMediaTypeProblem
from starlette.types import ASGIApp, Receive, Scope, Send

from wepush.server.api._auth import PRINCIPAL_KEY
from wepush.server.api._context import SCOPE_KEY
from wepush.server.application._services import ApplicationServices
from wepush.server.application.auth import Principal

__all__ = ["ScopeGate", "declared_scopes"]

_METHODS: Final = ("get", "put", "post", "delete", "patch")
#: The audit resource type of each tag of the contract.
_RESOURCE_TYPES: Final = {
    "Accounts": "ACCOUNT",
    "Agents": "AGENT",
    "Audiences": "AUDIENCE",
    "Audit": "AUDIT_EVENT",
    "Jobs": "JOB",
    "Messages": "MESSAGE",
    "Providers": "PROVIDER",
    "Runs": "RUN",
    "Schedules": "SCHEDULE",
    "Tokens": "API_TOKEN",
    "Workspaces": "WORKSPACE",
}


@dataclass(frozen=True, slots=True)
class DeclaredScope:
    minimum: str
    resource_type: str


def declared_scopes(spec: Mapping[str, Any]) -> dict[str, DeclaredScope]:
    """operationId → the role the contract declares for it and its audit resource type."""
    scopes: dict[str, DeclaredScope] = {}
    for item in spec.get("paths", {}).values():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None or "x-wepush-min-role" not in operation:
                continue
            tag = (operation.get("tags") or [""])[0]
            resource_type = _RESOURCE_TYPES.get(tag, tag.upper().removesuffix("S") or "OPERATION")
            scopes[operation["operationId"]] = DeclaredScope(operation["x-wepush-min-role"], resource_type)
    return scopes


class ScopeGate:
    """ASGI middleware between Connexion's security and request validation (it needs both the routed
    operation and the authenticated principal)."""

    def __init__(
        self, app: ASGIApp, scopes: Mapping[str, DeclaredScope], unimplemented: Collection[str] = ()
    ) -> None:
        self._app = app
        self._scopes = scopes
        self._unimplemented = frozenset(unimplemented)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        operation = _operation_id(scope)
        if operation in self._unimplemented:
            await self._check(scope, operation)
        try:
            await self._app(scope, receive, send)
        except (BadRequestProblem, UnsupportedMediaTypeProblem):
            # Raised by request validation, before the handler ran: nothing was done or sent yet.
            await self._check(scope, operation)
            raise

    async def _check(self, scope: Scope, operation: str | None) -> None:
        declared = self._scopes.get(operation or "")
        principal = _principal(scope)
        if operation is None or declared is None or principal is None:
            return
        services: ApplicationServices = scope[SCOPE_KEY]
        path_params = scope.get("path_params") or {}
        workspace_id = path_params.get("workspaceId")
        state = scope.get("state") or {}
        trace_id = state.get("trace_id") if isinstance(state, dict) else None
        await services.resources.scope.refuse_outside(
            principal,
            operation,
            declared.minimum,
            workspace_id if isinstance(workspace_id, str) else None,
            resource_type=declared.resource_type,
            trace_id=trace_id if isinstance(trace_id, str) else None,
        )


def _operation_id(scope: Scope) -> str | None:
    routing = (scope.get("extensions") or {}).get("connexion_routing") or {}
    operation = routing.get("operation_id")
    return operation if isinstance(operation, str) else None


def _principal(scope: Scope) -> Principal | None:
    context = (scope.get("extensions") or {}).get("connexion_context") or {}
    token_info = context.get("token_info")
    principal = token_info.get(PRINCIPAL_KEY) if isinstance(token_info, dict) else None
    return principal if isinstance(principal, Principal) else None
