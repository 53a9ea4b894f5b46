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

__all__ = ["BODY_IDLE_TIMEOUT", "HEADERS_TIMEOUT", "ProblemHttpToolsProtocol", "unparsable_request_body"]

#: Seconds a client has to send a request's headers, from the connection or from the previous response.
HEADERS_TIMEOUT: Final = 30.0
#: Seconds a request body may stay without a byte while the Service is ready to read it.
BODY_IDLE_TIMEOUT: Final = 60.0
_log = logging.getLogger("wepush.server.api")


def unparsable_request_body(parser_message: str, trace_id: str | None = None) -> bytes:
    detail = f"the request is not valid HTTP/1.1 ({parser_message.rstrip('.')}); nothing was processed"
    body = problem_body("VALIDATION_FAILED", detail, trace_id=trace_id)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    _slow_client: asyncio.TimerHandle | None = None
    headers_timeout: float = HEADERS_TIMEOUT
    body_idle_timeout: float = BODY_IDLE_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_within(self.headers_timeout, "its request headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_expectation()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._expect_within(self.body_idle_timeout, "its request body")

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._expect_within(self.body_idle_timeout, "its request body")

    def on_message_complete(self) -> None:
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

    def send_400_response(self, msg: str) -> None:
        # The request's own X-Trace-Id is not read: its headers are what could not be parsed.
        trace_id = uuid.uuid4().hex
        body = unparsable_request_body(msg, trace_id)
        content = [STATUS_LINE[400]]
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
