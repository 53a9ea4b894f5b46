"""Auth, timeouts, retries and typed errors under the generated client.

The generated ``ApiClient`` sends every operation through one object, ``api_client.rest_client``, whose
``request(method, url, headers, body, post_params, _request_timeout)`` returns a response that the caller
then reads and deserializes. :class:`RetryingRestClient` takes that object's place and delegates to the
original one, so every generated operation gains the SDK's behaviour without subclassing or editing
generated code (the least invasive hook the generator offers). Inside its loop it also reads the body, so
a connection dropped mid-response is a failure of that attempt and is retried like any network error.
"""

from __future__ import annotations

import http.client
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import urllib3

from wepush_client.exceptions import ApiException

from ._errors import TransportError, WePushError, problem_error_from_response
from ._retry import RetryPolicy, parse_retry_after

__all__ = ["BearerToken", "RetryingRestClient", "TokenSource"]

_log = logging.getLogger("wepush.sdk.remote")

TokenSource = str | Callable[[], str]

# urllib3 runs with its own retries disabled (the policy lives here), so these arrive unwrapped.
_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.TimeoutError,
    urllib3.exceptions.IncompleteRead,
    urllib3.exceptions.InvalidChunkLength,
    http.client.HTTPException,
    ConnectionError,
)


class BearerToken:
    """The API token, resolved again for every attempt so a rotating provider is honoured.

    Its repr is a fixed mask: the token must never reach logs, reprs or exception messages.
    """

    __slots__ = ("_source",)

    def __init__(self, source: TokenSource) -> None:
        if isinstance(source, str):
            self._check(source)
        elif not callable(source):
            raise TypeError("token must be a string or a callable returning a string")
        self._source = source

    @staticmethod
    def _check(value: object) -> str:
        if not isinstance(value, str) or not value or any(ch in value for ch in "\r\n\0"):
            # Deliberately vague: the offending value is the secret.
            raise WePushError("the API token is empty or contains control characters")
        return value

    def authorization(self) -> str:
        source = self._source
        return "Bearer " + self._check(source if isinstance(source, str) else source())

    def __repr__(self) -> str:
        return "BearerToken(***)"


def path_of(url: str) -> str:
    return urlsplit(url).path or "/"


class RetryingRestClient:
    """Stands in for the generated ``RESTClientObject`` with the same ``request`` signature."""

    def __init__(
        self,
        inner: Any,
        *,
        token: BearerToken,
        policy: RetryPolicy,
        timeout: tuple[float, float],
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._inner = inner
        self._token = token
        self._policy = policy
        self._timeout = timeout
        self._sleep = sleep
        self._rng = rng or random.Random()  # noqa: S311 - backoff jitter, not a secret
        self._now = now

    @property
    def pool_manager(self) -> Any:
        return self._inner.pool_manager

    def close(self) -> None:
        self._inner.pool_manager.clear()

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        request_headers = dict(headers or {})
        timeout = _request_timeout or self._timeout
        attempt = 0
        while True:
            request_headers["Authorization"] = self._token.authorization()
            try:
                # The inner client may edit the headers it gets (multipart), so it gets a copy per attempt.
                response = self._inner.request(
                    method,
                    url,
                    headers=dict(request_headers),
                    body=body,
                    post_params=post_params,
                    _request_timeout=timeout,
                )
                response.read()
            except _NETWORK_ERRORS as exc:
                delay = self._policy.after_network_error(attempt, method, request_headers, self._rng)
                if delay is None:
                    raise TransportError(
                        type(exc).__name__, method=method, path=path_of(url), attempts=attempt + 1
                    ) from exc
                self._pause(method, url, delay, type(exc).__name__)
                attempt += 1
                continue
            except ApiException as exc:
                # The generated client reports TLS failures as a status-0 ApiException: not retryable.
                raise TransportError(
                    str(exc.reason).splitlines()[0] if exc.reason else "TLS failure",
                    method=method,
                    path=path_of(url),
                    attempts=attempt + 1,
                ) from None
            status: int = response.status
            if 200 <= status < 300:
                return response
            retry_after = parse_retry_after(response.headers.get("Retry-After"), now=self._now())
            delay = self._policy.after_status(
                attempt, method, request_headers, status, retry_after, self._rng
            )
            if delay is None:
                raise problem_error_from_response(status, response.data, retry_after=retry_after)
            self._pause(method, url, delay, f"HTTP {status}")
            attempt += 1

    def _pause(self, method: str, url: str, delay: float, reason: str) -> None:
        _log.info(
            "retrying %s %s in %.2fs after %s",
            method,
            path_of(url),
            delay,
            reason,
            extra={"event": "SDK_REQUEST_RETRY"},
        )
        self._sleep(delay)
