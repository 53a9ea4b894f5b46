"""RateLimiter: a token bucket driven by the execution clock, applied after the concurrency permit."""

from __future__ import annotations

import asyncio

from ._policies import RateLimitPolicy
from ._ports import ExecutionClock

__all__ = ["RateLimiter"]


class RateLimiter:
    """``permits_per_second=None`` disables limiting. Waiters are served in arrival order."""

    def __init__(self, policy: RateLimitPolicy, clock: ExecutionClock) -> None:
        self._rate = policy.permits_per_second
        self._burst = float(policy.burst)
        self._clock = clock
        self._tokens = self._burst
        self._updated = clock.monotonic()
        self._lock = asyncio.Lock()
        self._waiting = 0

    @property
    def unlimited(self) -> bool:
        return self._rate is None

    def try_acquire(self) -> bool:
        """Take a token now if one is there and nobody is queued for one; never waits."""
        rate = self._rate
        if rate is None:
            return True
        if self._waiting:
            # Someone is already waiting for a token: stay behind them.
            return False
        self._refill(rate)
        if self._tokens >= 1.0 - 1e-9:
            self._tokens = max(0.0, self._tokens - 1.0)
            return True
        return False

    async def acquire(self) -> None:
        rate = self._rate
        if rate is None:
            return
        self._waiting += 1
        try:
            async with self._lock:
                while True:
                    self._refill(rate)
                    # The epsilon absorbs float drift so a full refill is not followed by a zero-length
                    # sleep.
                    if self._tokens >= 1.0 - 1e-9:
                        self._tokens = max(0.0, self._tokens - 1.0)
                        return
                    await self._clock.sleep((1.0 - self._tokens) / rate)
        finally:
            self._waiting -= 1

    def _refill(self, rate: float) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._updated) * rate)
        self._updated = now
