"""The connection state one :class:`WePushClient` shares with all its accessors.

Two HTTP stacks live here, each for what it does best: the generated client (urllib3) for every JSON
operation, wrapped by :class:`RetryingRestClient`; and one ``httpx.Client`` for what the generated client
cannot stream (CSV uploads, artifact downloads and Server-Sent Events).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from wepush_client import ApiClient, Configuration

from ._retry import ReconnectPolicy, RetryPolicy
from ._transport import BearerToken, RetryingRestClient
from ._validation import guarded_deserializer

__all__ = ["USER_AGENT", "Session", "Timeouts"]

USER_AGENT = "wepush-sdk-python/1"
#: How a date filter is written in a query string; the value is always in UTC by then.
QUERY_DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float = 5.0
    request: float = 30.0

    def __post_init__(self) -> None:
        if self.connect <= 0 or self.request <= 0:
            raise ValueError("timeouts must be > 0")

    def httpx(self, *, read: float | None = None) -> httpx.Timeout:
        return httpx.Timeout(self.request if read is None else read, connect=self.connect)

    def for_call(self, timeout: float | None) -> Timeouts:
        """These timeouts with one call's own ``timeout`` (seconds per read) in place of ``request``."""
        if timeout is None:
            return self
        if not timeout > 0:  # also refuses NaN
            raise ValueError("timeout must be > 0 seconds")
        return Timeouts(connect=self.connect, request=timeout)


@dataclass(slots=True, repr=False)
class Session:
    """Endpoint, token, policies and both HTTP stacks; owned and closed by one WePushClient."""

    endpoint: str
    token: BearerToken
    timeouts: Timeouts
    retry: RetryPolicy
    reconnect: ReconnectPolicy
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    api_client: Any = field(init=False)
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        # urllib3's own retries are off (retries=False): the policy is applied once, in RetryingRestClient.
        # No access_token is configured: RetryingRestClient sets Authorization on every attempt.
        configuration = Configuration(host=self.endpoint, retries=False)
        # The generated default "%Y-%m-%dT%H:%M:%S.%f%z" writes "+0000", which is no RFC 3339 and which the
        # Service refuses. Every date filter reaches the generated client in UTC (utc_instant), so "Z".
        configuration.datetime_format = QUERY_DATETIME_FORMAT
        self.api_client = ApiClient(configuration)
        self.api_client.user_agent = USER_AGENT
        # An answer the models refuse is the Service's fault (InvalidResponse), never the caller's.
        self.api_client.response_deserialize = guarded_deserializer(self.api_client.response_deserialize)
        self.api_client.rest_client = RetryingRestClient(
            self.api_client.rest_client,
            token=self.token,
            policy=self.retry,
            timeout=(self.timeouts.connect, self.timeouts.request),
            sleep=self.sleep,
            rng=self.rng,
            now=self.now,
        )
        self.http = httpx.Client(
            base_url=self.endpoint,
            timeout=self.timeouts.httpx(),
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )

    def auth_headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": self.token.authorization(), **extra}

    def close(self) -> None:
        self.http.close()
        self.api_client.rest_client.close()
