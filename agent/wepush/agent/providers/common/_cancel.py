"""Turning a Run's :class:`CancellationToken` into cancellation of the call in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from wepush.agent.providers.spi import CancellationToken

__all__ = ["await_cancellable"]

T = TypeVar("T")


async def await_cancellable(
    token: CancellationToken | None, call: Callable[[], Awaitable[T]], cancelled: Callable[[], T]
) -> T:
    """Await ``call()``; when ``token`` fires meanwhile the call is cancelled and ``cancelled()`` returned.

    Only a cancellation the token caused becomes a result; the engine's own
    task cancellation keeps propagating.
    """
    if token is None:
        return await call()
    task = asyncio.current_task()
    cancelled_by_token = False

    def on_cancel() -> None:
        nonlocal cancelled_by_token
        cancelled_by_token = True
        if task is not None:
            task.cancel()

    token.add_callback(on_cancel)
    try:
        return await call()
    except asyncio.CancelledError:
        if cancelled_by_token and task is not None and task.uncancel() == 0:
            return cancelled()
        raise
    finally:
        token.remove_callback(on_cancel)
