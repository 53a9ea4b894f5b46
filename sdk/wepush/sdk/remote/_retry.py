"""When the SDK may send a request again, and how long it waits first.

The seed's rules: GET and explicitly idempotent requests may be retried on network errors; a creating POST
only when it carries an ``Idempotency-Key``; business failures are never retried blindly; 429 and 503
honour ``Retry-After`` with a maximum wait. The decisions are pure functions of the request's method and
headers, the failure and the attempt number, so the table is tested without any network.

Decision table (``attempt`` counts the retries already made; nothing is retried once it reaches
``max_retries``):

=============================  ==========================  =============================================
failure                         replay-safe request         any other request
=============================  ==========================  =============================================
connect error, reset, timeout   backoff with jitter          raised as TransportError
429                             Retry-After or backoff       Retry-After or backoff (not processed, RFC 6585)
503                             Retry-After or backoff       raised as ServiceUnavailable
502, 504 (gateway)              Retry-After or backoff       raised
any other status                raised                       raised
Retry-After above the cap       raised with retry_after      raised with retry_after
=============================  ==========================  =============================================

Uploads (a PUT of a file) follow :meth:`RetryPolicy.after_unprocessed`: 429 and 503 are retried as above
when the SDK can send the body again (a path, bytes, a rewindable stream); network errors never are.

A request is replay-safe when its method is GET, HEAD or OPTIONS, or when it is a POST carrying an
``Idempotency-Key`` (the Service then returns the original result for a repeat). PUT and DELETE are not
retried: a repeated versioned update would answer VERSION_CONFLICT for a change that did succeed. When the
server asks to wait longer than ``max_retry_wait``, waiting less is pointless, so the SDK raises at once
and the caller sees ``retry_after``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = [
    "IDEMPOTENCY_KEY_HEADER",
    "ReconnectPolicy",
    "RetryPolicy",
    "is_replay_safe",
    "parse_retry_after",
]

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_GATEWAY_STATUSES = frozenset({502, 504})


def is_replay_safe(method: str, headers: Mapping[str, str]) -> bool:
    """Whether sending the request twice has the effect of sending it once."""
    verb = method.upper()
    if verb in _SAFE_METHODS:
        return True
    return verb == "POST" and any(
        name.lower() == "idempotency-key" and bool(value) for name, value in headers.items()
    )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delay-seconds or an HTTP-date; None when unusable."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        # float() of the text, not of int(text): a proxy's absurd value (hundreds of digits) is an
        # infinite wait, above any cap, where int() would overflow the conversion or its digit limit.
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def _jittered(ceiling: float, rng: random.Random) -> float:
    # "Equal jitter": at least half the computed delay, so retries never stampede at ~0 s, and a random
    # other half so many clients that failed together spread out.
    return ceiling * (0.5 + rng.random() / 2)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry limits for ordinary requests (see the module's decision table)."""

    max_retries: int = 3
    initial_backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.max_retry_wait < 0:
            raise ValueError("backoff and wait limits must be >= 0")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        return _jittered(min(self.max_backoff, self.initial_backoff * (2**attempt)), rng)

    def after_network_error(
        self, attempt: int, method: str, headers: Mapping[str, str], rng: random.Random
    ) -> float | None:
        """Delay before retrying after a connect error, reset or timeout; None means give up."""
        if attempt >= self.max_retries or not is_replay_safe(method, headers):
            return None
        return self.backoff(attempt, rng)

    def after_status(
        self,
        attempt: int,
        method: str,
        headers: Mapping[str, str],
        status: int,
        retry_after: float | None,
        rng: random.Random,
    ) -> float | None:
        """Delay before retrying after an HTTP answer with ``status``; None means raise it."""
        if attempt >= self.max_retries:
            return None
        if status == 429:
            pass
        elif status == 503 or status in _GATEWAY_STATUSES:
            if not is_replay_safe(method, headers):
                return None
        else:
            return None
        return self._wait(attempt, retry_after, rng)

    def after_unprocessed(
        self, attempt: int, status: int, retry_after: float | None, rng: random.Random
    ) -> float | None:
        """Delay before sending a replayable upload again after 429 or 503; None means raise it.

        Both answers say the request was not processed, so a body the SDK can send again (a file path,
        bytes, a rewindable stream) is retried like a replay-safe request; anything else is raised.
        """
        if attempt >= self.max_retries or status not in (429, 503):
            return None
        return self._wait(attempt, retry_after, rng)

    def _wait(self, attempt: int, retry_after: float | None, rng: random.Random) -> float | None:
        if retry_after is None:
            return self.backoff(attempt, rng)
        if retry_after > self.max_retry_wait:
            return None
        return retry_after


@dataclass(frozen=True, slots=True)
class ReconnectPolicy:
    """How an event subscription reconnects after its stream drops.

    ``max_attempts`` bounds consecutive failed connection attempts (a connection that delivers events
    resets the count); None reconnects forever. ``heartbeat_timeout`` is the read timeout: the Service
    sends a heartbeat comment every 15 s, so a silent connection is treated as dropped after it.
    """

    initial_delay: float = 0.5
    max_delay: float = 30.0
    max_attempts: int | None = 10
    heartbeat_timeout: float = 45.0

    def __post_init__(self) -> None:
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("reconnect delays must be >= 0")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1 or None")
        if self.heartbeat_timeout <= 0:
            raise ValueError("heartbeat_timeout must be > 0")

    def delay(self, failures: int, server_retry: float | None, rng: random.Random) -> float:
        """Delay before reconnect number ``failures`` (1-based); the server's ``retry:`` field is the base."""
        base = self.initial_delay if server_retry is None else server_retry
        return _jittered(min(self.max_delay, base * (2 ** max(0, failures - 1))), rng)
