"""Counts and times every HTTP request for ``/metrics``, labelled by the contract's operation id.

The operation id is what Connexion's router matched (``scope["extensions"]["connexion_routing"]``), so
the labels stay as few as the contract's operations, whatever paths clients try: a request no operation
matched (an unknown path, or one refused before routing, such as a body over the limit) is ``unmatched``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wepush.server.application.metrics import RequestMetrics

__all__ = ["UNMATCHED_OPERATION", "HttpMetricsMiddleware"]

UNMATCHED_OPERATION: Final = "unmatched"
# The client went away before any response began (nginx's convention); no status was ever sent.
_CLIENT_CLOSED: Final = 499


class HttpMetricsMiddleware:
    """``metrics`` is asked at each request: the instance's metrics exist only once start-up finished,
    and ``None`` (not started, or turned off) records nothing."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Callable[[], RequestMetrics | None],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._app = app
        self._metrics = metrics
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics = self._metrics() if scope["type"] == "http" else None
        if metrics is None:
            await self._app(scope, receive, send)
            return
        started = self._clock()
        status = _CLIENT_CLOSED
        # Connexion's router works on a shallow copy of the scope and records the operation it matched in
        # ``extensions``: created here, that dict is the same object in the copy, so the match shows here.
        extensions = scope.setdefault("extensions", {})

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, sending)
        except BaseException:
            if status == _CLIENT_CLOSED:
                status = 500  # what the server answers for an exception no handler turned into a response
            raise
        finally:
            routing = extensions.get("connexion_routing") or {}
            operation = routing.get("operation_id") or UNMATCHED_OPERATION
            metrics.request_finished(
                str(operation), str(scope.get("method", "")), status, self._clock() - started
            )
