"""How many API requests a caller may make: a token bucket per API token (seed: 429 调用频率超限).

Each token starts with ``burst`` requests in hand and earns ``rate`` more per second, never holding more
than ``burst``; a request when the bucket is empty is refused with ``RATE_LIMITED`` and told how long to
wait (``Retry-After``). The budget is per Service instance: behind a load balancer with N instances a
caller may reach up to N times the rate, which still bounds what one runaway script can do to one
instance. Buckets live in memory only; the least recently seen are forgotten first (a forgotten bucket
is a full one, which is what a caller that has been quiet for a while has anyway).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Final

from wepush.server.domain import DomainError

#: Callers whose buckets are remembered at once.
_REMEMBERED_CALLERS: Final = 10_000


class RateLimited(DomainError):
    code: ClassVar[str] = "RATE_LIMITED"

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(
            f"This API token made more requests than its budget allows; retry in {retry_after_seconds} s."
        )
        self.retry_after_seconds = retry_after_seconds


@dataclass(slots=True)
class _Bucket:
    tokens: float
    refilled_at: float


class RequestBudget:
    """``spend(caller)`` admits a request or raises :class:`RateLimited`; ``rate`` 0 admits everything."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        if rate < 0 or burst < 1:
            raise ValueError("the rate must be at least 0 and the burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def spend(self, caller: str) -> None:
        if not self.enabled:
            return
        now = self._clock()
        bucket = self._buckets.get(caller)
        if bucket is None:
            bucket = self._buckets[caller] = _Bucket(self._burst, now)
            while len(self._buckets) > _REMEMBERED_CALLERS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(caller)
            # max(): a clock that steps back must not drain the bucket.
            bucket.tokens = min(self._burst, bucket.tokens + max(0.0, now - bucket.refilled_at) * self._rate)
            bucket.refilled_at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        raise RateLimited(max(1, math.ceil((1.0 - bucket.tokens) / self._rate)))
