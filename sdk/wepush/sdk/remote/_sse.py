"""An incremental ``text/event-stream`` decoder following the WHATWG HTML "server-sent events" rules.

Network chunks arrive cut anywhere: inside a line, between the CR and LF of a CRLF, in the middle of a
field. :class:`SSEDecoder` keeps the partial line and the event being built between calls to
:meth:`SSEDecoder.feed`, and returns each event once its blank line arrives. Comments (``: heartbeat``) and
unknown fields are ignored; ``id`` fills the last-event-ID buffer, which each blank line (even one that
dispatches nothing) confirms as :attr:`SSEDecoder.last_event_id`, the value a reconnect sends; ``retry``
updates the reconnection delay; an event without data is not dispatched; whatever is pending when a
stream ends is discarded, including an id whose block never completed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent"]

_EOL = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event.

    ``id`` is the id field of this event's own block (None when the block had none); ``last_event_id`` is
    the decoder's last-event-ID buffer at dispatch, which is what a reconnect sends as ``Last-Event-ID``.
    """

    event: str
    data: str
    id: str | None
    last_event_id: str


class SSEDecoder:
    def __init__(self, last_event_id: str = "") -> None:
        self.last_event_id = last_event_id
        self._id_buffer = last_event_id
        self.retry_ms: int | None = None
        self._line = ""
        self._pending_cr = False
        self._at_start = True
        self._data: list[str] = []
        self._event = ""
        self._block_id: str | None = None

    def feed(self, text: str) -> list[ServerSentEvent]:
        """Consume decoded text; return the events completed by it, in order."""
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._pending_cr and text.startswith("\n"):
            # The CR ending the previous chunk and this LF are one CRLF line break.
            text = text[1:]
        self._pending_cr = False
        events: list[ServerSentEvent] = []
        position = 0
        for match in _EOL.finditer(text):
            line = self._line + text[position : match.start()]
            self._line = ""
            position = match.end()
            if match.group() == "\r" and position == len(text):
                self._pending_cr = True
            event = self._process(line)
            if event is not None:
                events.append(event)
        self._line += text[position:]
        return events

    def reset(self) -> None:
        """Forget the unfinished line and event (the stream ended); keep last_event_id and retry."""
        self._line = ""
        self._pending_cr = False
        self._at_start = True
        self._data = []
        self._event = ""
        self._block_id = None
        self._id_buffer = self.last_event_id

    def _process(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
                self._block_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        block_id, self._block_id = self._block_id, None
        self.last_event_id = self._id_buffer
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=block_id,
            last_event_id=self.last_event_id,
        )
        self._data = []
        self._event = ""
        return event
