"""A chunked JSON request body is read whole, then handed on with a Content-Length.

Connexion decides that a request has no body from a missing or zero Content-Length (connexion#2020), so
a JSON body sent with ``Transfer-Encoding: chunked`` (a streaming HTTP client, ``curl -T -``, Go and
Java clients that do not know the length up front) was refused as "RequestBody is required". Connexion
reads a JSON body whole anyway, so nothing is lost by reading it first; this runs inside the body size
limit, which stops the read at the limit with 413.
Other media types (a CSV import, artifact content) are streams their handlers read as they arrive, and
pass through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ChunkedBodyMiddleware"]

_DROPPED: frozenset[bytes] = frozenset({b"transfer-encoding", b"content-length"})


def _chunked_json(scope: Scope) -> bool:
    chunked = json = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return False
        if name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower()
            json = media_type == b"application/json" or media_type.endswith(b"+json")
    return chunked and json


class ChunkedBodyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _chunked_json(scope):
            await self.app(scope, receive, send)
            return
        parts: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away before the end of its body: nobody to answer
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(parts)
        headers = [(name, value) for name, value in scope["headers"] if name not in _DROPPED]
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)
