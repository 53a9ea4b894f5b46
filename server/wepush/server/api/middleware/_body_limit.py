"""Request body size limits, enforced on the declared Content-Length and on the bytes actually streamed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wepush.server.api.middleware._problem import send_problem

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyLimitOverride", "BodySizeLimitMiddleware"]

DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class BodyLimitOverride:
    """A larger (or smaller) limit for the paths ``matches`` accepts, e.g. the audience import upload."""

    matches: Callable[[str], bool]
    max_bytes: int


class _PayloadTooLarge(Exception):
    """Raised from ``receive`` to stop the application reading past the limit."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodySizeLimitMiddleware:
    """Answers 413 ``PAYLOAD_TOO_LARGE`` for bodies over the limit, including chunked bodies.

    A declared Content-Length over the limit is refused before the application runs. A streamed body is
    counted as it is received; once over the limit the application's ``receive`` raises, its response
    (if any) is discarded and the 413 problem is sent instead, unless the application had already
    started its response, in which case the error propagates and the server aborts the connection.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = DEFAULT_MAX_BODY_BYTES,
        overrides: Sequence[BodyLimitOverride] = (),
    ) -> None:
        if max_bytes < 0 or any(rule.max_bytes < 0 for rule in overrides):
            raise ValueError("body size limits must not be negative")
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = tuple(overrides)

    def limit_for(self, path: str) -> int:
        for rule in self.overrides:
            if rule.matches(path):
                return rule.max_bytes
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await self._reject(scope, send, limit)
            return

        received = 0
        exceeded = False
        response_started = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise _PayloadTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if exceeded and not response_started:
                return
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            # Anything the application raised while unwinding from the limit is the limit's doing.
            if not exceeded or response_started:
                raise
        if exceeded and not response_started:
            await self._reject(scope, send, limit)

    @staticmethod
    async def _reject(scope: Scope, send: Send, limit: int) -> None:
        await send_problem(
            send,
            scope,
            status=413,
            code="PAYLOAD_TOO_LARGE",
            title="Payload too large",
            detail=f"The request body exceeds the limit of {limit} bytes for this endpoint.",
        )
