"""Assemble the ASGI application: the contract, its handlers, error translation and the outer middlewares."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import resources
from typing import Any

from connexion import AsyncApp
from connexion.exceptions import ProblemException
from connexion.middleware import MiddlewarePosition
from connexion.options import SwaggerUIOptions
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from wepush.server.api._context import SCOPE_KEY
from wepush.server.api._problems import (
    AllowedMethods,
    handle_client_disconnect,
    handle_coded_error,
    handle_connexion_problem,
    handle_master_key_error,
    handle_not_started,
    handle_unexpected,
    http_exception_handler,
)
from wepush.server.api._scope_gate import ScopeGate, declared_scopes
from wepush.server.api._validation import validator_map
from wepush.server.application._services import ApplicationServices, ServiceNotStarted
from wepush.server.application.credentials import CredentialRejected, TokenMalformed
from wepush.server.application.idempotency import IdempotencyConflict, IdempotencyKeyInvalid
from wepush.server.application.paging import CursorInvalid, PageLimitInvalid
from wepush.server.composition._resolver import HandlerResolver, unimplemented_operations
from wepush.server.domain import DomainError
from wepush.server.domain.secrets import MasterKeyError

#: Errors that carry a stable ``code`` (and maybe ``status``) and become problem+json as they are.
CODED_ERRORS: tuple[type[Exception], ...] = (
    DomainError,
    CursorInvalid,
    PageLimitInvalid,
    IdempotencyConflict,
    IdempotencyKeyInvalid,
    TokenMalformed,
    CredentialRejected,
)

API_DOCS_PATH = "/api/v1/ui"
OPENAPI_PATH = "/api/v1/openapi.json"


def load_openapi() -> dict[str, Any]:
    """The bundled contract produced by ``make generate`` (a dict, so Connexion does no templating)."""
    text = resources.files("wepush.generated.resources").joinpath("openapi.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


class ServicesMiddleware:
    """Expose the application services to handlers through the ASGI scope."""

    def __init__(self, app: ASGIApp, services: ApplicationServices) -> None:
        self._app = app
        self._services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope[SCOPE_KEY] = self._services
        await self._app(scope, receive, send)


Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


@asynccontextmanager
async def _no_lifespan(_app: Any) -> AsyncIterator[None]:
    yield


class ServiceApp:
    """The Service's ASGI entry point, keeping a handle on the Connexion app and its resolver."""

    def __init__(self, asgi: ASGIApp, connexion_app: AsyncApp, spec: dict[str, Any]) -> None:
        self._asgi = asgi
        self.connexion_app = connexion_app
        self.spec = spec

    @property
    def unimplemented_operations(self) -> list[str]:
        return unimplemented_operations(self.spec)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._asgi(scope, receive, send)


class _KnownConnexionNoise(logging.Filter):
    """Connexion warns on every request to an operation that accepts several media types (the import
    content takes CSV and plain text) even though it then uses the request's own type: six lines per
    upload that say nothing to an operator."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("this operation accepts multiple content types")


logging.getLogger("connexion.operations.openapi3").addFilter(_KnownConnexionNoise())


def create_app(
    services: ApplicationServices,
    *,
    lifespan: Lifespan | None = None,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
) -> ServiceApp:
    """Build the Service app. ``wrap`` adds outer middlewares (security headers, limits, CORS)."""
    spec = load_openapi()
    app = AsyncApp(__name__, lifespan=lifespan or _no_lifespan)
    app.add_api(
        spec,
        resolver=HandlerResolver(),
        strict_validation=True,
        validate_responses=True,
        pythonic_params=True,
        validator_map=validator_map(),
        swagger_ui_options=SwaggerUIOptions(spec_path=OPENAPI_PATH, swagger_ui_path=API_DOCS_PATH),
    )
    app.add_middleware(
        ScopeGate,
        position=MiddlewarePosition.BEFORE_VALIDATION,
        scopes=declared_scopes(spec),
        unimplemented=unimplemented_operations(spec),
    )
    app.add_error_handler(ProblemException, handle_connexion_problem)
    app.add_error_handler(HTTPException, http_exception_handler(AllowedMethods(spec)))
    for coded in CODED_ERRORS:
        app.add_error_handler(coded, handle_coded_error)
    app.add_error_handler(ServiceNotStarted, handle_not_started)
    app.add_error_handler(ClientDisconnect, handle_client_disconnect)
    app.add_error_handler(MasterKeyError, handle_master_key_error)
    app.add_error_handler(Exception, handle_unexpected)
    asgi: ASGIApp = ServicesMiddleware(app, services)
    if wrap is not None:
        asgi = wrap(asgi)
    return ServiceApp(asgi, app, spec)
