"""aiohttp pieces whose rules are the same for every HTTP-speaking channel.

A response is read only up to a cap, so an endless body never fills memory, and
every request carries an explicit timeout that never outlasts the item's
deadline.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import aiohttp

from wepush.agent.engine import ExecutionClock, ExecutionPolicies

__all__ = ["RequestTimeouts", "connect_timeout_for", "read_capped", "while_connecting"]


def connect_timeout_for(configured: timedelta, policies: ExecutionPolicies) -> timedelta:
    """The account's connect timeout, capped by the job's ``policies.timeout.connect``: the account says
    how long its vendor may take, a job may ask to give up sooner (never later)."""
    cap = policies.timeout.connect
    return configured if cap is None else min(configured, cap)


def while_connecting(error: BaseException) -> bool:
    """Whether ``error`` — a cancellation, or aiohttp's timeout made of one — stopped a request while
    aiohttp was still getting it a connection (connecting, or waiting for a pooled one): then nothing of
    the request was sent.

    Read off the traceback when a request fails, so a request that succeeds pays nothing (marking each
    request as it got its connection cost the HTTP provider about 20,000 instructions a request). Only
    the error and the cancellation it was raised ``from`` are read, never an earlier error it was merely
    handled beside. Anything else, an aiohttp whose internals moved among it, answers False: "may have
    been sent", the safe reading.
    """
    for link in (error, error.__cause__):
        traceback = link.__traceback__ if link is not None else None
        while traceback is not None:
            frame = traceback.tb_frame
            if frame.f_code.co_name == "connect" and frame.f_globals.get("__name__") == "aiohttp.connector":
                return True
            traceback = traceback.tb_next
    return False


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
