"""Response helpers: every operation declares JSON and problem+json, so handlers name their media type."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from connexion.lifecycle import ConnexionResponse
from starlette.responses import StreamingResponse
from starlette.types import Send

JSON = "application/json"


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> ConnexionResponse:
    return ConnexionResponse(
        status_code=status,
        mimetype=JSON,
        content_type=JSON,
        body=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        headers=dict(headers or {}),
    )


def empty_response(status: int = 204, headers: Mapping[str, str] | None = None) -> ConnexionResponse:
    return ConnexionResponse(status_code=status, body=b"", headers=dict(headers or {}))


class BreakableStreamingResponse(StreamingResponse):
    """A stream that is left unfinished when its content raises one of ``breaks_on``.

    Once the status line is out, no error can be answered any more; ending the body normally would hand
    the client a truncated file as if it were whole. Returning without the final chunk instead makes the
    server close the connection, which every HTTP client reports as an incomplete transfer. The content
    is expected to have logged why.
    """

    def __init__(self, *args: Any, breaks_on: tuple[type[Exception], ...], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._breaks_on = breaks_on

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                body = chunk if isinstance(chunk, bytes | memoryview) else chunk.encode(self.charset)
                await send({"type": "http.response.body", "body": body, "more_body": True})
        except self._breaks_on:
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
