"""CORS from an explicit origin allow-list: starlette's CORSMiddleware, refusing a preflight with a problem."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Final, TypedDict
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from wepush.server.api.middleware._problem import PROBLEM_CONTENT_TYPE, problem_body
from wepush.server.infra.logging import current_trace_id

__all__ = ["CorsOptions", "ProblemCorsMiddleware", "cors_middleware_options"]

# What starlette's refusal ("Disallowed CORS origin, headers") names, as the request header that asked.
_REFUSED_PARTS: Final = {
    "origin": ("Origin", "is not in the CORS allow-list (wepush.server.cors-allowed-origins)"),
    "method": ("Access-Control-Request-Method", "is not a method cross-origin requests may use"),
    "headers": ("Access-Control-Request-Headers", "names a header cross-origin requests may not send"),
    "private-network": ("Access-Control-Request-Private-Network", "is not allowed"),
}
_REFUSAL_PREFIX: Final = "Disallowed CORS "


class CorsOptions(TypedDict):
    allow_origins: list[str]
    allow_methods: list[str]
    allow_headers: list[str]
    expose_headers: list[str]
    allow_credentials: bool
    max_age: int


def _normalize_origin(origin: str) -> str:
    candidate = origin.strip().rstrip("/")
    parts = urlsplit(candidate)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or "*" in candidate
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise ValueError(f"CORS origin {origin!r} must be an exact scheme://host[:port] (no wildcards)")
    # Spelled as browsers send the Origin header: IPv6 literals in brackets, the scheme's default port
    # left out (an origin that never matches would refuse the listed site without saying why).
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if parts.scheme == "https" else 80
    port = f":{parts.port}" if parts.port is not None and parts.port != default else ""
    return f"{parts.scheme}://{host}{port}"


def cors_middleware_options(allowed_origins: Sequence[str]) -> CorsOptions | None:
    """``CORSMiddleware(app, **options)`` settings, or ``None`` (add no CORS at all) for an empty list.

    Credentials (cookies) are not allowed cross-origin: API clients authenticate with bearer tokens.
    """
    origins = list(dict.fromkeys(_normalize_origin(origin) for origin in allowed_origins))
    if not origins:
        return None
    return CorsOptions(
        allow_origins=origins,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
        allow_headers=[
            "Authorization",
            "Content-Type",
            "Idempotency-Key",
            "If-Match",
            "Last-Event-ID",
            "X-Trace-Id",
        ],
        expose_headers=["X-Trace-Id", "ETag", "Location", "Retry-After"],
        allow_credentials=False,
        max_age=600,
    )


class ProblemCorsMiddleware(CORSMiddleware):
    """A refused preflight is ``application/problem+json`` naming what was refused, as every other error;
    starlette answers it in plain text. Only the body changes: the refusal itself is starlette's."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code != 400:
            return response
        text = bytes(response.body).decode("utf-8", errors="replace")
        parts = text.removeprefix(_REFUSAL_PREFIX).split(", ") if text.startswith(_REFUSAL_PREFIX) else []
        errors = [
            {"field": field, "code": "NOT_ALLOWED", "message": message}
            for field, message in (_REFUSED_PARTS[part] for part in parts if part in _REFUSED_PARTS)
        ]
        body = problem_body(
            status=400,
            code="VALIDATION_FAILED",
            title="Request validation failed",
            detail="The cross-origin request was refused: "
            + (", ".join(e["field"] for e in errors) or "not allowed")
            + ".",
            trace_id=current_trace_id() or uuid.uuid4().hex,
        )
        body["errors"] = errors
        headers = {
            name: value
            for name, value in response.headers.items()
            if name.lower() not in ("content-type", "content-length")
        }
        return Response(
            json.dumps(body, separators=(",", ":")),
            status_code=400,
            headers=headers,
            media_type=PROBLEM_CONTENT_TYPE,
        )
