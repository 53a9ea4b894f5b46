"""Options for starlette's CORSMiddleware from an explicit origin allow-list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict
from urllib.parse import urlsplit

__all__ = ["CorsOptions", "cors_middleware_options"]


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
