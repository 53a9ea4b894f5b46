"""Server-Sent Events framing for run events, and the streaming response that carries them.

Each message is ``id: <sequence>``, ``event: <lower-cased type>`` and ``data: <RunEvent JSON>``. While
nothing happens a comment line (``: heartbeat``) is sent every heartbeat interval, so proxies keep the
connection open and clients notice a dead one. The stream ends after the terminal event, or when the
subscriber was dropped for falling behind (the client reconnects with Last-Event-ID).

Connexion passes a Starlette response returned by a handler through unchanged, and no response body
validator is registered for ``text/event-stream``, so nothing buffers the stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from starlette.responses import StreamingResponse

from wepush.server.application.runs import EventStreamEnded, EventSubscription
from wepush.server.domain import RunEvent

SSE_MEDIA_TYPE: Final = "text/event-stream"
HEARTBEAT: Final = b": heartbeat\n\n"


def sse_message(event: RunEvent, body: dict[str, Any]) -> bytes:
    # Compact JSON never contains a raw newline (they are escaped), so one data line suffices.
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.sequence}\nevent: {event.type.lower()}\ndata: {data}\n\n".encode()


#: Says whether the credential that opened a stream is still valid (not revoked, not expired).
CredentialCheck = Callable[[], Awaitable[bool]]


async def sse_frames(
    subscription: EventSubscription,
    heartbeat_seconds: float,
    render: Callable[[RunEvent], dict[str, Any]],
    still_valid: CredentialCheck | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[bytes]:
    """The stream's frames. The credential is checked again once per heartbeat interval, quiet or busy:
    a token revoked (or expired) while its stream is open stops receiving within one interval, and the
    client's reconnect is then refused with 401 like any other request."""
    checked_at = clock()
    try:
        while True:
            try:
                event = await subscription.next_event(heartbeat_seconds)
            except EventStreamEnded:
                return
            if still_valid is not None and clock() - checked_at >= heartbeat_seconds:
                if not await still_valid():
                    return
                checked_at = clock()
            yield HEARTBEAT if event is None else sse_message(event, render(event))
    finally:
        subscription.close()


def sse_response(
    subscription: EventSubscription,
    heartbeat_seconds: float,
    render: Callable[[RunEvent], dict[str, Any]],
    still_valid: CredentialCheck | None = None,
) -> StreamingResponse:
    return StreamingResponse(
        sse_frames(subscription, heartbeat_seconds, render, still_valid),
        media_type=SSE_MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
