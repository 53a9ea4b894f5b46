"""aiohttp pieces whose rules are the same for every HTTP-speaking channel.

A response is read only up to a cap, so an endless body never fills memory, and
every request carries an explicit timeout that never outlasts the item's
deadline.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import aiohttp

from wepush.agent.engine import ExecutionClock

__all__ = ["RequestTimeouts", "read_capped"]


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
