"""uvicorn's HTTP/1.1 protocol, answering a request it cannot parse with a problem, as the API does, and
closing connections that send too slowly to be anything but a resource exhaustion attempt.

A request that is not valid HTTP/1.1 (a ``Transfer-Encoding`` other than chunked, a broken header line
…) never reaches the application: uvicorn's parser refuses it on its own, with a ``text/plain`` 400.
Every error a client meets is ``application/problem+json`` with a stable code, so this one is too. The
parser's text is uvicorn's fixed sentence, never the request's bytes.

uvicorn waits for a request's headers, and for the rest of a body that its Content-Length announced,
for ever: thousands of connections that send half a header line (or a few bytes of a body) held as many
file descriptors without ever authenticating. Here a request's headers must arrive within
``HEADERS_TIMEOUT`` of the connection (or of the previous response), and a body may not fall silent for
``BODY_IDLE_TIMEOUT`` while the Service is reading it; a slow but steady upload of hours is unaffected.

Nor does uvicorn bound the size of a request's headers: its parser gathers a header line of any length in
memory, so one unauthenticated request with a 100 MB header held the event loop for seconds and the
process's memory for good. A request line and headers longer than ``MAX_HEAD_BYTES`` together are
answered 431 and the connection closed, as soon as that many bytes have arrived (nginx and Node.js stop
at 8 to 32 KiB; every request of the contract needs well under 4 KiB).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Final

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from wepush.server.api._problems import PROBLEM_MEDIA_TYPE, problem_body
from wepush.server.api.middleware import TRACE_ID_HEADER, security_headers

__all__ = [
    "BODY_IDLE_TIMEOUT",
    "HEADERS_TIMEOUT",
    "MAX_HEAD_BYTES",
    "ProblemHttpToolsProtocol",
    "unparsable_request_body",
]

#: Seconds a client has to send a request's headers, from the connection or from the previous response.
HEADERS_TIMEOUT: Final = 30.0
#: Seconds a request body may stay without a byte while the Service is ready to read it.
BODY_IDLE_TIMEOUT: Final = 60.0
#: Bytes a request line and its headers may take together.
MAX_HEAD_BYTES: Final = 64 * 1024
_log = logging.getLogger("wepush.server.api")


def unparsable_request_body(parser_message: str, trace_id: str | None = None) -> bytes:
    detail = f"the request is not valid HTTP/1.1 ({parser_message.rstrip('.')}); nothing was processed"
    body = problem_body("VALIDATION_FAILED", detail, trace_id=trace_id)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def oversized_head_body(limit: int, trace_id: str | None = None) -> bytes:
    detail = f"the request line and headers exceed {limit} bytes; nothing was processed"
    body = problem_body("PAYLOAD_TOO_LARGE", detail, status=431, trace_id=trace_id)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    _slow_client: asyncio.TimerHandle | None = None
    headers_timeout: float = HEADERS_TIMEOUT
    body_idle_timeout: float = BODY_IDLE_TIMEOUT
    max_head_bytes: int = MAX_HEAD_BYTES
    #: Whether the parser is inside a request's line and headers, how many bytes they took so far, and
    #: how many bytes of the chunk being parsed were body (not head).
    _in_head = False
    _head_too_large = False
    _head_bytes = 0
    _body_bytes_fed = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_within(self.headers_timeout, "its request headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_expectation()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._body_bytes_fed = 0
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        # A chunk may end one request's body and start the next request's head: only the rest counts.
        self._head_bytes += len(data) - self._body_bytes_fed
        if self._head_bytes > self.max_head_bytes:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        # The chunk that ends the head is parsed before data_received could count it: measure the head
        # the parser handed over (the URL and every header line), so a head sent in one piece is bounded.
        if self._parsed_head_bytes() > self.max_head_bytes:
            # Answered and closed here; the parser's callbacks for the rest of this chunk do nothing.
            self._head_too_large = True
            self._refuse_head()
            return
        super().on_headers_complete()
        self._expect_within(self.body_idle_timeout, "its request body")

    def _parsed_head_bytes(self) -> int:
        # ": " and CRLF around each header, and the method and version around the URL.
        return len(self.url) + 16 + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def on_body(self, body: bytes) -> None:
        self._body_bytes_fed += len(body)
        if self._head_too_large:
            return
        super().on_body(body)
        self._expect_within(self.body_idle_timeout, "its request body")

    def on_message_complete(self) -> None:
        if self._head_too_large:
            return
        super().on_message_complete()
        self._cancel_expectation()

    def on_response_complete(self) -> None:
        # A pipelined request already sent its headers and now runs: only an idle connection waits.
        idle = not self.pipeline
        super().on_response_complete()
        if idle and not self.transport.is_closing():
            self._expect_within(self.headers_timeout, "its next request headers")

    def _expect_within(self, seconds: float, what: str) -> None:
        self._cancel_expectation()
        self._slow_client = self.loop.call_later(seconds, self._too_slow, what)

    def _cancel_expectation(self) -> None:
        if self._slow_client is not None:
            self._slow_client.cancel()
            self._slow_client = None

    def _too_slow(self, what: str) -> None:
        self._slow_client = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:
            # The Service itself stopped reading (its application is behind): not the client's silence.
            self._expect_within(self.body_idle_timeout, what)
            return
        _log.info(
            "closed a connection that did not send %s in time", what, extra={"event": "CLIENT_TOO_SLOW"}
        )
        self.transport.close()

    def _refuse_head(self) -> None:
        _log.info(
            "refused a request whose headers exceed %d bytes",
            self.max_head_bytes,
            extra={"event": "REQUEST_HEADERS_TOO_LARGE"},
        )
        self._cancel_expectation()
        trace_id = uuid.uuid4().hex
        self._answer_and_close(431, oversized_head_body(self.max_head_bytes, trace_id), trace_id)

    def send_400_response(self, msg: str) -> None:
        # The request's own X-Trace-Id is not read: its headers are what could not be parsed.
        trace_id = uuid.uuid4().hex
        self._answer_and_close(400, unparsable_request_body(msg, trace_id), trace_id)

    def _answer_and_close(self, status: int, body: bytes, trace_id: str) -> None:
        content = [STATUS_LINE[status]]
        headers = [
            *(
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in self.server_state.default_headers
            ),
            *security_headers("/api"),
            (TRACE_ID_HEADER, trace_id),
            ("content-type", PROBLEM_MEDIA_TYPE),
            ("content-length", str(len(body))),
            ("connection", "close"),
        ]
        for name, value in headers:
            content.extend([name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n"])
        content.extend([b"\r\n", body])
        self.transport.write(b"".join(content))
        self.transport.close()
