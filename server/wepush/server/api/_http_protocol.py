"""uvicorn's HTTP/1.1 protocol, answering a request it cannot parse with a problem, as the API does.

A request that is not valid HTTP/1.1 (a ``Transfer-Encoding`` other than chunked, a broken header line
…) never reaches the application: uvicorn's parser refuses it on its own, with a ``text/plain`` 400.
Every error a client meets is ``application/problem+json`` with a stable code, so this one is too. The
parser's text is uvicorn's fixed sentence, never the request's bytes.
"""

from __future__ import annotations

import json
import uuid

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from wepush.server.api._problems import PROBLEM_MEDIA_TYPE, problem_body
from wepush.server.api.middleware import TRACE_ID_HEADER, security_headers

__all__ = ["ProblemHttpToolsProtocol", "unparsable_request_body"]


def unparsable_request_body(parser_message: str, trace_id: str | None = None) -> bytes:
    detail = f"the request is not valid HTTP/1.1 ({parser_message.rstrip('.')}); nothing was processed"
    body = problem_body("VALIDATION_FAILED", detail, trace_id=trace_id)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


class ProblemHttpToolsProtocol(HttpToolsProtocol):
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
