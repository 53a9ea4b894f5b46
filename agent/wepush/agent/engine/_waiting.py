"""Small helpers for waits that a stopping run must be able to interrupt."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

__all__ = ["wait_or_stop"]


async def wait_or_stop(work: Coroutine[Any, Any, Any], stop: asyncio.Event) -> bool:
    """Run ``work`` until it finishes (``True``) or ``stop`` is set first (``False``, work cancelled)."""
    if stop.is_set():
        work.close()
        return False
    work_task: asyncio.Task[Any] = asyncio.ensure_future(work)
    stop_task = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({work_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_task.cancel()
        if not work_task.done():
            work_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work_task
    if work_task in done and not work_task.cancelled():
        work_task.result()
        return True
    return False
