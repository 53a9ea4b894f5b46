"""Redirects name a path, never a host.

Starlette answers a path with a trailing slash (``/api/v1/workspaces/``) with a 307 to the path
without it, and builds the absolute Location from the request's ``Host`` header: a request claiming
``Host: evil.example`` was sent to ``http://evil.example/…``, which a cache in front could keep and
serve to others. RFC 9110 allows a relative Location, which every client resolves against the URL it
asked; so the scheme and host are cut off.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RelativeRedirectMiddleware"]


def _relative(location: bytes) -> bytes:
    parts = urlsplit(location.decode("latin-1"))
    if not parts.scheme and not parts.netloc:
        return location
    return urlunsplit(("", "", parts.path or "/", parts.query, parts.fragment)).encode("latin-1")


class RelativeRedirectMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def relative_send(message: Message) -> None:
            if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
                message = {
                    **message,
                    "headers": [
                        (name, _relative(value) if name.lower() == b"location" else value)
                        for name, value in message.get("headers", [])
                    ],
                }
            await send(message)

        await self.app(scope, receive, relative_send)
