"""Run event subscriptions: Server-Sent Events with reconnect, backoff and ``Last-Event-ID``.

A dropped stream does not mean the run failed: the subscription reconnects with exponential backoff and
jitter, sends the highest sequence it delivered as ``Last-Event-ID``, and drops any replayed event whose
sequence is not above it, so the caller sees every event once and in order. It ends after the terminal
``RUN_COMPLETED`` event, on ``close()``, or with an error: ``CursorExpired`` (410) when the Service purged the
requested position (reload the run detail instead), another typed problem for 4xx answers, or
``TransportError`` after ``ReconnectPolicy.max_attempts`` consecutive failed connections.

:class:`EventSubscription` iterates synchronously over the client's shared connection pool;
:class:`AsyncEventSubscription` iterates with ``async for`` over its own ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import httpx

from wepush_client.models import RunEvent

from ._errors import InvalidResponse, TransportError, WePushError, problem_error_from_response
from ._retry import ReconnectPolicy, parse_retry_after
from ._session import USER_AGENT, Session
from ._sse import ServerSentEvent, SSEDecoder

__all__ = ["TERMINAL_EVENT_TYPES", "AsyncEventSubscription", "EventSubscription", "RunEventMessage"]

#: Event types after which a run emits nothing more (see contracts/openapi/schemas/event.yaml).
TERMINAL_EVENT_TYPES = frozenset({"RUN_COMPLETED"})
_STREAM_ERRORS = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
_RECONNECT_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RunEventMessage:
    """One run event as delivered on the stream: SSE ``id`` (the sequence), ``event`` name and JSON data.

    ``data`` is the event's JSON object as received (camelCase keys, not checked against the contract);
    :meth:`to_model` gives the typed, validated ``RunEvent``.
    """

    id: str | None
    event: str
    data: dict[str, Any]

    @property
    def sequence(self) -> int | None:
        return _sequence(self.id)

    @property
    def type(self) -> str:
        """The RunEventType (``PROGRESS``, ``RUN_COMPLETED`` ...): the JSON ``type``, else the event name."""
        value = self.data.get("type")
        return value if isinstance(value, str) else self.event.upper()

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENT_TYPES

    def to_model(self) -> RunEvent:
        """The event as the generated ``wepush_client.models.RunEvent``."""
        return RunEvent.from_dict(self.data)


def _sequence(value: str | None) -> int | None:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


class _Cursor:
    """The I/O-free part of a subscription: position, de-duplication and reconnect decisions."""

    def __init__(
        self, session: Session, path: str, last_event_id: str | None, policy: ReconnectPolicy
    ) -> None:
        self.session = session
        self.path = path
        self.policy = policy
        self.decoder = SSEDecoder(last_event_id or "")
        self.last_sequence = _sequence(last_event_id)
        self.failures = 0
        self.finished = False
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def headers(self) -> dict[str, str]:
        headers = self.session.auth_headers(Accept="text/event-stream", **{"Cache-Control": "no-cache"})
        resume_from = (
            str(self.last_sequence) if self.last_sequence is not None else self.decoder.last_event_id
        )
        if resume_from:
            headers["Last-Event-ID"] = resume_from
        return headers

    def start_stream(self) -> None:
        self.decoder.reset()
        self._utf8.reset()

    def feed(self, chunk: bytes) -> list[RunEventMessage]:
        # Any byte, heartbeat comments included, proves the connection healthy again.
        self.failures = 0
        messages = []
        for sse in self.decoder.feed(self._utf8.decode(chunk)):
            message = self._accept(sse)
            if message is not None:
                messages.append(message)
                if message.terminal:
                    self.finished = True
                    break
        return messages

    def _accept(self, sse: ServerSentEvent) -> RunEventMessage | None:
        sequence = _sequence(sse.id)
        if sequence is not None and self.last_sequence is not None and sequence <= self.last_sequence:
            return None
        try:
            data = json.loads(sse.data)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise InvalidResponse(f"run event {sse.id!r} on {self.path} does not carry a JSON object")
        if sequence is not None:
            self.last_sequence = sequence
        return RunEventMessage(id=sse.id, event=sse.event, data=data)

    def on_answer(self, response: httpx.Response) -> float | None:
        """Check a connection's answer; returns a reconnect delay or raises. None: the stream is usable."""
        status = response.status_code
        if status == 204:
            # The server's way (WHATWG) of saying there is nothing more to stream.
            self.finished = True
            return None
        if status == 200:
            media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if media_type != "text/event-stream":
                raise InvalidResponse(
                    f"GET {self.path} answered {media_type or 'no media type'}, not an event stream"
                )
            return None
        retry_after = parse_retry_after(response.headers.get("Retry-After"), now=self.session.now())
        problem = problem_error_from_response(status, response.content, retry_after=retry_after)
        reconnectable = status in _RECONNECT_STATUSES or status >= 500
        if not reconnectable or (retry_after is not None and retry_after > self.session.retry.max_retry_wait):
            raise problem
        return self._next_delay(problem, None, retry_after)

    def on_drop(self, error: httpx.HTTPError | None) -> float:
        """The connection failed or ended before the terminal event; returns the reconnect delay or raises."""
        reason = type(error).__name__ if error is not None else "stream ended"
        failure = TransportError(reason, method="GET", path=self.path, attempts=self.failures + 1)
        return self._next_delay(failure, error, None)

    def _next_delay(
        self, failure: WePushError, cause: BaseException | None, retry_after: float | None
    ) -> float:
        self.failures += 1
        if self.policy.max_attempts is not None and self.failures > self.policy.max_attempts:
            raise failure from cause
        if retry_after is not None:
            return retry_after
        server_retry = None if self.decoder.retry_ms is None else self.decoder.retry_ms / 1000
        return self.policy.delay(self.failures, server_retry, self.session.rng)


class EventSubscription:
    """Synchronous iterator of a run's events; use as ``with`` block or call :meth:`close`.

    :meth:`close` may be called from another thread: the iterating thread stops at the latest when the
    next event or heartbeat arrives (every 15 s).
    """

    def __init__(
        self, session: Session, path: str, *, last_event_id: str | None = None, reconnect: ReconnectPolicy
    ) -> None:
        self._cursor = _Cursor(session, path, last_event_id, reconnect)
        self._closed = threading.Event()
        # Held while the generator runs, so close() from another thread never touches a running generator.
        self._running = threading.Lock()
        self._messages = self._run()

    @property
    def last_event_id(self) -> str | None:
        """The sequence to resume from (for a later subscription), once an event was delivered."""
        sequence = self._cursor.last_sequence
        return str(sequence) if sequence is not None else (self._cursor.decoder.last_event_id or None)

    def __iter__(self) -> Iterator[RunEventMessage]:
        return self

    def __next__(self) -> RunEventMessage:
        with self._running:
            return next(self._messages)

    def _run(self) -> Generator[RunEventMessage]:
        cursor = self._cursor
        session = cursor.session
        timeout = session.timeouts.httpx(read=cursor.policy.heartbeat_timeout)
        while not cursor.finished and not self._closed.is_set():
            cursor.start_stream()
            delay: float | None = None
            try:
                with session.http.stream(
                    "GET", cursor.path, headers=cursor.headers(), timeout=timeout
                ) as response:
                    if response.status_code != 200:
                        response.read()
                    delay = cursor.on_answer(response)
                    if delay is None and not cursor.finished:
                        for chunk in response.iter_bytes():
                            yield from cursor.feed(chunk)
                            if cursor.finished or self._closed.is_set():
                                return
                        delay = cursor.on_drop(None)
            except _STREAM_ERRORS as exc:
                if self._closed.is_set():
                    return
                delay = cursor.on_drop(exc)
            if delay is not None:
                self._closed.wait(delay)

    def close(self) -> None:
        """Stop the subscription and release its connection; idempotent."""
        self._closed.set()
        if self._running.acquire(blocking=False):
            try:
                self._messages.close()
            finally:
                self._running.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncEventSubscription:
    """Asynchronous iterator of a run's events (``async for``); use ``async with`` or :meth:`aclose`."""

    def __init__(
        self, session: Session, path: str, *, last_event_id: str | None = None, reconnect: ReconnectPolicy
    ) -> None:
        self._cursor = _Cursor(session, path, last_event_id, reconnect)
        self._closed = False
        self._client: httpx.AsyncClient | None = None
        self._messages = self._run()

    @property
    def last_event_id(self) -> str | None:
        sequence = self._cursor.last_sequence
        return str(sequence) if sequence is not None else (self._cursor.decoder.last_event_id or None)

    def __aiter__(self) -> AsyncIterator[RunEventMessage]:
        return self

    async def __anext__(self) -> RunEventMessage:
        return await anext(self._messages)

    def _http(self) -> httpx.AsyncClient:
        # Created inside the running loop on first use: an AsyncClient's pool belongs to one event loop.
        if self._client is None:
            session = self._cursor.session
            self._client = httpx.AsyncClient(
                base_url=session.endpoint,
                timeout=session.timeouts.httpx(read=self._cursor.policy.heartbeat_timeout),
                headers={"User-Agent": USER_AGENT},
                follow_redirects=False,
            )
        return self._client

    async def _run(self) -> AsyncGenerator[RunEventMessage]:
        cursor = self._cursor
        while not cursor.finished and not self._closed:
            cursor.start_stream()
            delay: float | None = None
            try:
                async with self._http().stream("GET", cursor.path, headers=cursor.headers()) as response:
                    if response.status_code != 200:
                        await response.aread()
                    delay = cursor.on_answer(response)
                    if delay is None and not cursor.finished:
                        async for chunk in response.aiter_bytes():
                            for message in cursor.feed(chunk):
                                yield message
                            if cursor.finished or self._closed:
                                return
                        delay = cursor.on_drop(None)
            except _STREAM_ERRORS as exc:
                if self._closed:
                    return
                delay = cursor.on_drop(exc)
            if delay is not None:
                await asyncio.sleep(delay)

    async def aclose(self) -> None:
        """Stop the subscription and close its connection pool; idempotent."""
        self._closed = True
        # RuntimeError: another task is inside __anext__; closing the client below ends its read, and
        # then it sees the flag.
        with contextlib.suppress(RuntimeError):
            await self._messages.aclose()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
