"""aiohttp pieces whose rules are the same for every HTTP-speaking channel.

A response is read only up to a cap, so an endless body never fills memory, and
every request carries an explicit timeout that never outlasts the item's
deadline.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from datetime import datetime, timedelta

import aiohttp
from aiohttp.client_reqrep import ClientRequest
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from wepush.agent.engine import CancellationToken, ExecutionClock, ExecutionPolicies

__all__ = [
    "Connecting",
    "ConnectionMarkingConnector",
    "RequestTimeouts",
    "connect_timeout_for",
    "read_capped",
]


def connect_timeout_for(configured: timedelta, policies: ExecutionPolicies) -> timedelta:
    """The account's connect timeout, capped by the job's ``policies.timeout.connect``: the account says
    how long its vendor may take, a job may ask to give up sooner (never later)."""
    cap = policies.timeout.connect
    return configured if cap is None else min(configured, cap)


class Connecting:
    """One request's progress as far as it tells whether anything was sent: ``connected`` turns true once
    the request has a connection. A timeout before that sent nothing (a vendor that does not accept
    connections, or a pool waited on), whatever timer ran out: the request's own timeout or the item's
    deadline fire while connecting whenever they are shorter than the connect timeout.

    Use ``with progress.watch():`` around the request on a session whose connector is a
    :class:`ConnectionMarkingConnector`.
    """

    __slots__ = ("_token", "connected")

    def __init__(self, token: CancellationToken | None = None) -> None:
        """With the call's ``token``, the connection also tells the engine the call may now reach the
        vendor (``CancellationToken.sending``), so a deadline before it ends the item as not sent."""
        self.connected = False
        self._token = token

    def mark_connected(self) -> None:
        self.connected = True
        if self._token is not None:
            self._token.sending()

    @contextlib.contextmanager
    def watch(self) -> Iterator[Connecting]:
        token = _WATCHED.set(self)
        try:
            yield self
        finally:
            _WATCHED.reset(token)


# A context variable, not aiohttp's request tracing: a trace config makes aiohttp emit every signal of
# every request, which cost the HTTP provider about a seventh of its throughput.
_WATCHED: contextvars.ContextVar[Connecting | None] = contextvars.ContextVar(
    "wepush_connecting", default=None
)


class ConnectionMarkingConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that marks the watched :class:`Connecting` once a request has its connection."""

    async def connect(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's signature, overridden
    ) -> Connection:
        connection = await super().connect(req, traces, timeout)
        watched = _WATCHED.get()
        if watched is not None:
            watched.mark_connected()
        return connection


async def read_capped(response: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the body and whether more was there.

    A small uncompressed body with a known length is read in one call; otherwise
    the stream is read until one byte past the cap, so an endless body never
    fills memory. ``Content-Length`` counts encoded bytes: a small gzip body may
    inflate far past the cap, so only an identity-encoded body takes the shortcut.
    """
    length = response.content_length
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if length is not None and length <= cap and encoding in {"", "identity"}:
        return await response.read(), False
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = await response.content.read(cap + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    if size > cap:
        return data[:cap], True
    return data, False


class RequestTimeouts:
    """The timeout of each request: the configured one, cut short by the item's deadline."""

    __slots__ = ("_connect", "_request", "default")

    def __init__(self, connect: timedelta, request: timedelta) -> None:
        self._connect = connect
        self._request = request
        # Passed on every request: aiohttp reads ``timeout=None`` as "no timeout at all".
        self.default = aiohttp.ClientTimeout(
            total=request.total_seconds(), sock_connect=connect.total_seconds()
        )

    def until(self, deadline: datetime | None, clock: ExecutionClock) -> aiohttp.ClientTimeout:
        if deadline is None:
            return self.default
        remaining = deadline - clock.now()
        if remaining >= self._request:
            return self.default
        return aiohttp.ClientTimeout(
            total=max(remaining, timedelta(milliseconds=1)).total_seconds(),
            sock_connect=self._connect.total_seconds(),
        )
