"""One Content-Type per request, its media type in lower case before anything reads it.

Media types are case-insensitive (RFC 9110 §8.3.1), but Connexion picks a body validator by an exact,
case-sensitive match: ``APPLICATION/JSON`` found no validator, so the body went to the handler as raw
bytes — a 500, or on an operation whose body is optional a body silently dropped (a run confirmation
asked for ``dryRun: true`` and got a real one). Lower-casing the type and subtype here gives every later
step the spelling it matches on; parameters (``charset=…``, a multipart boundary) are left as sent,
since a boundary is case-sensitive.

Two Content-Type headers are refused: Starlette and Connexion read the first, a proxy in front may have
judged the other.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from wepush.server.api.middleware._problem import send_problem

__all__ = ["MediaTypeMiddleware"]

_CONTENT_TYPE = b"content-type"


def _lowered(value: bytes) -> bytes:
    media_type, separator, parameters = value.partition(b";")
    return media_type.strip().lower() + separator + parameters


class MediaTypeMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
        sent = [value for name, value in headers if name == _CONTENT_TYPE]
        if len(sent) > 1:
            await send_problem(
                send,
                scope,
                status=400,
                code="VALIDATION_FAILED",
                title="Request validation failed",
                detail="Content-Type: send the header once",
            )
            return
        if sent and _lowered(sent[0]) != sent[0]:
            scope = dict(scope)
            scope["headers"] = [
                (name, _lowered(value) if name == _CONTENT_TYPE else value) for name, value in headers
            ]
        await self.app(scope, receive, send)
