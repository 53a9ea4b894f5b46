"""uvicorn's HTTP/1.1 protocol, answering a request it cannot parse with a problem, as the API does.

A request that is not valid HTTP/1.1 (a ``Transfer-Encoding`` other than chunked, a broken header line
…) never reaches the application: uvicorn's parser refuses it on its own, with a ``text/plain`` 400.
Every error a client meets is ``application/problem+json`` with a stable code, so this one is too. The
parser's text is uvicorn's fixed sentence, never the request's bytes.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from wepush.server.api._problems import PROBLEM_MEDIA_TYPE, problem_body

__all__ = ["ProblemHttpToolsProtocol", "unparsable_request_body"]


def unparsable_request_body(parser_message: str) -> bytes:
    detail = f"the request is not valid HTTP/1.1 ({parser_message.rstrip('.')}); nothing was processed"
    return json.dumps(problem_body("VALIDATION_FAILED", detail), separators=(",", ":")).encode("utf-8")


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        body = unparsable_request_body(msg)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: " + PROBLEM_MEDIA_TYPE.encode("ascii") + b"\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"x-content-type-options: nosniff\r\n",
                b"cache-control: no-store\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
