"""Default security response headers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DEFAULT_CONTENT_SECURITY_POLICY",
    "DOCS_CONTENT_SECURITY_POLICY",
    "SecurityHeadersMiddleware",
    "security_headers",
]

DEFAULT_CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
)
# The API docs UI (Swagger UI) boots from an inline script and inline styles; only its prefix gets these.
DOCS_CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; base-uri 'self'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
)


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def security_headers(
    path: str,
    *,
    docs_prefix: str = "/api/v1/ui",
    no_store_prefixes: Sequence[str] = ("/api", "/internal"),
    content_security_policy: str = DEFAULT_CONTENT_SECURITY_POLICY,
    docs_content_security_policy: str = DOCS_CONTENT_SECURITY_POLICY,
    hsts_max_age: int | None = None,
) -> list[tuple[str, str]]:
    """The default headers of a response to ``path``; also what a response written outside the ASGI app
    carries (the 400 to a request uvicorn cannot parse)."""
    csp = docs_content_security_policy if _under(path, docs_prefix) else content_security_policy
    headers = [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("content-security-policy", csp),
    ]
    if any(_under(path, prefix) for prefix in no_store_prefixes):
        headers.append(("cache-control", "no-store"))
    if hsts_max_age is not None:
        # Only when the deployment terminates TLS for this origin; HSTS over plain HTTP is ignored.
        headers.append(("strict-transport-security", f"max-age={hsts_max_age}"))
    return headers


class SecurityHeadersMiddleware:
    """Adds nosniff, frame denial, no-referrer, a CSP, and ``Cache-Control: no-store`` on API paths.

    Headers the application set itself are left alone, so an endpoint can opt into, say, caching.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        docs_prefix: str = "/api/v1/ui",
        no_store_prefixes: Sequence[str] = ("/api", "/internal"),
        content_security_policy: str = DEFAULT_CONTENT_SECURITY_POLICY,
        docs_content_security_policy: str = DOCS_CONTENT_SECURITY_POLICY,
        hsts_max_age: int | None = None,
    ) -> None:
        self.app = app
        self.docs_prefix = docs_prefix
        self.no_store_prefixes = tuple(no_store_prefixes)
        self.content_security_policy = content_security_policy
        self.docs_content_security_policy = docs_content_security_policy
        self.hsts_max_age = hsts_max_age

    def headers_for(self, path: str) -> list[tuple[str, str]]:
        return security_headers(
            path,
            docs_prefix=self.docs_prefix,
            no_store_prefixes=self.no_store_prefixes,
            content_security_policy=self.content_security_policy,
            docs_content_security_policy=self.docs_content_security_policy,
            hsts_max_age=self.hsts_max_age,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        defaults = self.headers_for(scope["path"])

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in defaults:
                    if name not in headers:
                        headers.append(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
