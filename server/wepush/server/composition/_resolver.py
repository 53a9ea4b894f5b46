"""Bind each operation to ``<x-openapi-router-controller>.<snake_case(operationId)>``.

An operation whose handler is not written yet is bound to a handler that answers 501 problem+json, and
is recorded in ``unimplemented`` so a test can list what remains.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from connexion.lifecycle import ConnexionResponse
from connexion.resolver import Resolution, Resolver

from wepush.server.api._problems import problem_response

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(operation_id: str) -> str:
    return _CAMEL.sub("_", operation_id).lower()


def _not_implemented(operation_id: str) -> Callable[..., Any]:
    async def handler(*_args: Any, **_kwargs: Any) -> ConnexionResponse:
        return problem_response("NOT_IMPLEMENTED", f"The operation {operation_id} is not implemented yet.")

    handler.__name__ = f"not_implemented_{snake_case(operation_id)}"
    return handler


def find_handler(controller: str, operation_id: str) -> Callable[..., Any] | None:
    """The hand-written handler for an operation, or None when it is not written yet."""
    try:
        module = importlib.import_module(controller)
    except ModuleNotFoundError as exc:
        if exc.name != controller:
            raise
        return None
    function = getattr(module, snake_case(operation_id), None)
    return function if callable(function) else None


_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def unimplemented_operations(spec: Mapping[str, Any]) -> list[str]:
    """operationIds of the contract whose handler does not exist yet (they answer 501)."""
    missing: list[str] = []
    for item in spec.get("paths", {}).values():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            controller = operation.get("x-openapi-router-controller") or item.get(
                "x-openapi-router-controller"
            )
            if not controller or find_handler(controller, operation["operationId"]) is None:
                missing.append(operation["operationId"])
    return sorted(missing)


class HandlerResolver(Resolver):
    def resolve(self, operation: Any) -> Resolution:
        operation_id: str = operation.operation_id
        controller: str | None = operation.router_controller
        if not controller:
            raise ValueError(f"operation {operation_id} has no x-openapi-router-controller")
        function = find_handler(controller, operation_id) or _not_implemented(operation_id)
        return Resolution(function, operation_id)
