"""Every error leaves the Service as ``application/problem+json`` with a stable ``code``.

Connexion raises its own problems for validation and authentication failures; they are translated here
so clients always see the seed's codes (VALIDATION_FAILED, AUTHENTICATION_REQUIRED, ...) and never a
stack trace.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, Final

from connexion.exceptions import ProblemException
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from starlette.exceptions import HTTPException

from wepush.server.api.middleware._problem import PROBLEM_CONTENT_TYPE, problem_type
from wepush.server.domain import NameAlreadyUsed
from wepush.server.infra.logging import current_trace_id

PROBLEM_MEDIA_TYPE = PROBLEM_CONTENT_TYPE
_log = logging.getLogger("wepush.server.api")

#: The title and status of each stable code.
CODES: Mapping[str, tuple[int, str]] = {
    "VALIDATION_FAILED": (400, "Request validation failed"),
    "CURSOR_INVALID": (400, "Invalid pagination cursor"),
    "AUTHENTICATION_REQUIRED": (401, "Authentication required"),
    "ACCESS_DENIED": (403, "Access denied"),
    "RESOURCE_NOT_FOUND": (404, "Resource not found"),
    "VERSION_CONFLICT": (409, "Version conflict"),
    "IDEMPOTENCY_CONFLICT": (409, "Idempotency key reused with a different request"),
    "RUN_STATE_CONFLICT": (409, "Run state conflict"),
    "RESOURCE_IN_USE": (409, "Resource in use"),
    "LEASE_EXPIRED": (409, "Lease expired"),
    "ARTIFACT_NOT_READY": (409, "Artifact not ready"),
    "CONFIRMATION_REQUIRED": (400, "Confirmation required"),
    "IMPORT_STATE_CONFLICT": (409, "Import state conflict"),
    "CONFIRMATION_INVALID": (409, "Confirmation invalid"),
    "CURSOR_EXPIRED": (410, "Event cursor expired"),
    "PAYLOAD_TOO_LARGE": (413, "Payload too large"),
    "IMPORT_LIMIT_EXCEEDED": (413, "Import limit exceeded"),
    "PROVIDER_CONFIG_INVALID": (422, "Provider configuration invalid"),
    "RATE_LIMITED": (429, "Too many requests"),
    "INTERNAL_ERROR": (500, "Internal error"),
    "NOT_IMPLEMENTED": (501, "Not implemented"),
    "PROVIDER_NOT_AVAILABLE": (503, "Provider not available"),
    "AGENT_NOT_AVAILABLE": (503, "Agent not available"),
    "SERVICE_NOT_READY": (503, "Service not ready"),
}

_STATUS_CODES: Mapping[int, str] = {
    400: "VALIDATION_FAILED",
    401: "AUTHENTICATION_REQUIRED",
    403: "ACCESS_DENIED",
    404: "RESOURCE_NOT_FOUND",
    405: "VALIDATION_FAILED",
    406: "VALIDATION_FAILED",
    409: "VERSION_CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "VALIDATION_FAILED",
    429: "RATE_LIMITED",
    501: "NOT_IMPLEMENTED",
    503: "SERVICE_NOT_READY",
}


def problem_body(
    code: str,
    detail: str,
    *,
    status: int | None = None,
    trace_id: str | None = None,
    errors: Sequence[Mapping[str, str]] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    default_status, title = CODES.get(code, (500, "Error"))
    body: dict[str, Any] = {
        "type": problem_type(code),
        "title": title,
        "status": status or default_status,
        "code": code,
        "detail": detail[:4096],
        "errors": [dict(e) for e in errors],
    }
    if trace_id:
        body["traceId"] = trace_id
    if extra:
        body.update(extra)
    return body


def problem_response(
    code: str,
    detail: str,
    *,
    status: int | None = None,
    trace_id: str | None = None,
    errors: Sequence[Mapping[str, str]] = (),
    extra: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ConnexionResponse:
    # Every problem carries the request's trace id, also where the caller had none at hand (501s).
    trace_id = trace_id or current_trace_id()
    body = problem_body(code, detail, status=status, trace_id=trace_id, errors=errors, extra=extra)
    return ConnexionResponse(
        status_code=body["status"],
        mimetype=PROBLEM_MEDIA_TYPE,
        content_type=PROBLEM_MEDIA_TYPE,
        body=json.dumps(body).encode(),
        headers=dict(headers or {}),
    )


def _trace_id(request: ConnexionRequest) -> str | None:
    """The id the trace middleware bound to this request (it validates or generates it)."""
    state = request.scope.get("state") or {}
    value = state.get("trace_id") if isinstance(state, dict) else None
    return value if isinstance(value, str) else None


def _field_errors(detail: str) -> list[dict[str, str]]:
    """One entry per failure, naming the field: body errors read ``/path: rule``; parameter errors name
    the parameter in quotes."""
    if not detail:
        return []
    if detail.startswith("/") and ": " in detail:
        field = detail.split(": ", 1)[0]
    elif detail.startswith("Invalid Content-type") or "media type" in detail.lower():
        field = "Content-Type"  # the quoted token of these messages is the media type, not a field
    elif "'" in detail:
        field = detail.split("'")[1]
    else:
        field = ""
    return [{"field": field[:512], "code": "INVALID", "message": detail[:1024]}]


async def handle_connexion_problem(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    assert isinstance(exc, ProblemException)
    code = _STATUS_CODES.get(exc.status, "INTERNAL_ERROR" if exc.status >= 500 else "VALIDATION_FAILED")
    detail = str(exc.detail or exc.title or "")[:4096]
    errors = _field_errors(detail) if code == "VALIDATION_FAILED" else []
    if code == "AUTHENTICATION_REQUIRED":
        # Never echo what was (or was not) presented as a credential.
        detail = "A valid credential is required for this operation."
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return problem_response(
        code, detail, status=exc.status, trace_id=_trace_id(request), errors=errors, headers=headers
    )


class AllowedMethods:
    """The methods the contract defines for a request path: the ``Allow`` header of a 405.

    A path can match several templates (``…/commands/pause`` and ``…/commands/{commandId}``); it allows
    the methods of all of them. (Starlette's own header names only the methods of the first route whose
    path matched, which for such a path is incomplete.)"""

    _METHODS: Final = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self._routes: list[tuple[re.Pattern[str], frozenset[str]]] = []
        for template, operations in (spec.get("paths") or {}).items():
            parts = re.split(r"(\{[^/}]+\})", template)
            pattern = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)
            methods = frozenset(m.upper() for m in operations if m in self._METHODS)
            self._routes.append((re.compile(f"^{pattern}$"), methods))

    def __call__(self, path: str) -> list[str]:
        return sorted(set().union(*(methods for pattern, methods in self._routes if pattern.match(path))))


def http_exception_handler(
    allowed: AllowedMethods,
) -> Callable[[ConnexionRequest, Exception], Awaitable[ConnexionResponse]]:
    async def handle_http_exception(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
        assert isinstance(exc, HTTPException)
        code = _STATUS_CODES.get(
            exc.status_code, "INTERNAL_ERROR" if exc.status_code >= 500 else "VALIDATION_FAILED"
        )
        methods = allowed(request.url.path) if exc.status_code == 405 else []
        # Starlette's bare "Method Not Allowed" and "Not Found" leave the client guessing; name what the
        # path offers, or that no route matched (a revision "abc" where a number belongs, a typo).
        if methods:
            detail = f"{request.method} is not an operation of this path; it allows {', '.join(methods)}."
        elif exc.status_code == 404 and exc.detail == HTTPStatus.NOT_FOUND.phrase:
            detail = (
                "No operation of this API is at this path; check its spelling and the ids and numbers in it."
            )
        else:
            detail = str(exc.detail)
        return problem_response(
            code,
            detail,
            status=exc.status_code,
            trace_id=_trace_id(request),
            headers={"Allow": ", ".join(methods)} if methods else None,
        )

    return handle_http_exception


async def handle_unexpected(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    # The exception goes to the (redacting) log, never to the client.
    _log.error(
        "unhandled error in %s %s",
        request.method,
        request.url.path,
        exc_info=exc,
        extra={"event": "REQUEST_FAILED"},
    )
    return problem_response(
        "INTERNAL_ERROR", "The Service could not complete the request.", trace_id=_trace_id(request)
    )


async def handle_client_disconnect(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """The client closed the connection before its request body was complete (an upload cancelled,
    a proxy timing out): an everyday event, logged without a traceback so that alerting on errors does
    not fire for it. Nobody reads the answer; what the request had started (an import) has already been
    failed by its use case."""
    _log.info(
        "client went away before the end of its request body: %s %s",
        request.method,
        request.url.path,
        extra={"event": "CLIENT_DISCONNECTED"},
    )
    return problem_response(
        "VALIDATION_FAILED",
        "The connection closed before the request body was complete.",
        status=400,
        trace_id=_trace_id(request),
    )


async def handle_master_key_error(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """The master key cannot be read any more (its file's mode widened, the file gone, a version
    missing): nothing can be sealed or opened until an operator fixes it. The log says what is wrong;
    the client learns that the Service cannot serve this now, not where its key file is."""
    _log.error(
        "the master key cannot be used: %s (%s %s)",
        exc,
        request.method,
        request.url.path,
        extra={"event": "MASTER_KEY_UNAVAILABLE"},
    )
    return problem_response(
        "SERVICE_NOT_READY",
        "The Service cannot use its master key; an operator has to check the key file (see the Service log).",
        status=503,
        trace_id=_trace_id(request),
    )


def _domain_extras(exc: Exception) -> tuple[list[dict[str, str]], dict[str, Any]]:
    errors: list[dict[str, str]] = []
    extra: dict[str, Any] = {}
    issues = getattr(exc, "issues", None)
    if issues:
        errors = [issue.as_dict() for issue in issues]
    elif isinstance(exc, NameAlreadyUsed):
        errors = [
            {"field": "/name", "code": "NAME_ALREADY_USED", "message": f"another {exc.resource_type} has it"}
        ]
    current = getattr(exc, "current_state", None)
    if current is not None:
        extra["currentState"] = getattr(current, "value", str(current))
    allowed = getattr(exc, "allowed_commands", None)
    if allowed is not None:
        extra["allowedCommands"] = [getattr(c, "value", str(c)) for c in allowed]
    allowed_range = getattr(exc, "allowed_range", None)
    if allowed_range is not None:
        extra["allowedRange"] = {"min": allowed_range[0], "max": allowed_range[1]}
    return errors, extra


async def handle_coded_error(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """Domain and application errors carry a stable ``code`` (and sometimes a ``status``)."""
    code = str(getattr(exc, "code", "INTERNAL_ERROR"))
    status = getattr(exc, "status", None)
    if not isinstance(status, int):
        status = CODES.get(code, (500, ""))[0]
    if code == "SERVICE_NOT_READY":
        # Expected and retryable (a busy database, a bucket that does not answer): one line, no traceback.
        _log.warning(
            "%s %s answered 503 SERVICE_NOT_READY: %s",
            request.method,
            request.url.path,
            exc,
            extra={"event": "REQUEST_NOT_READY"},
        )
    elif status >= 500:
        _log.error(
            "coded error %s in %s %s",
            code,
            request.method,
            request.url.path,
            exc_info=exc,
            extra={"event": "REQUEST_FAILED"},
        )
    errors, extra = _domain_extras(exc)
    retry_after = getattr(exc, "retry_after_seconds", None)
    return problem_response(
        code,
        str(exc),
        status=status,
        trace_id=_trace_id(request),
        errors=errors,
        extra=extra,
        headers={"Retry-After": str(retry_after)} if isinstance(retry_after, int) else None,
    )


async def handle_not_started(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    return problem_response(
        "SERVICE_NOT_READY",
        "The Service is starting or stopping; retry shortly.",
        status=503,
        trace_id=_trace_id(request),
        headers={"Retry-After": "2"},
    )
