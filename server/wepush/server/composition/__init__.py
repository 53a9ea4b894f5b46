"""The composition root: wires ports to adapters and builds the Service's ASGI application."""

from __future__ import annotations

from wepush.server.composition._app import API_DOCS_PATH, OPENAPI_PATH, ServiceApp, create_app, load_openapi
from wepush.server.composition._resolver import HandlerResolver, snake_case

__all__ = [
    "API_DOCS_PATH",
    "OPENAPI_PATH",
    "HandlerResolver",
    "ServiceApp",
    "create_app",
    "load_openapi",
    "snake_case",
]
