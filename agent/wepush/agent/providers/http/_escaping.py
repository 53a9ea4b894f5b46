"""Where a rendered value goes decides how it is escaped.

Inside a JSON document a value is inserted as a JSON string-escaped fragment
(the template supplies the surrounding quotes), in a form body it is
percent-encoded, and in a URL path segment it is percent-encoded with ``/``
escaped so a value can never add path segments. Each :class:`Escaping` is the
escape function the shared ``{{variable}}`` :class:`Template` applies.
"""

from __future__ import annotations

import enum
from json.encoder import encode_basestring
from urllib.parse import quote, quote_plus

__all__ = ["Escaping", "escaping_for_content_type"]


class Escaping(enum.Enum):
    JSON_STRING = "json-string"
    FORM = "form"
    PATH_SEGMENT = "path-segment"
    RAW = "raw"

    def __call__(self, text: str) -> str:
        if self is Escaping.JSON_STRING:
            # The C encoder behind json.dumps(ensure_ascii=False): it escapes quotes,
            # backslashes and every control character and leaves other text readable.
            return str(encode_basestring(text))[1:-1]
        if self is Escaping.FORM:
            return quote_plus(text, safe="")
        if self is Escaping.PATH_SEGMENT:
            if text in {".", ".."}:
                # Dot segments would be collapsed by URL normalisation and walk the path.
                raise ValueError("a dot segment cannot be used in a URL path")
            return quote(text, safe="")
        return text


def escaping_for_content_type(content_type: str | None) -> Escaping:
    """Choose body escaping from a Content-Type header value."""
    if content_type is None:
        return Escaping.RAW
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return Escaping.JSON_STRING
    if media == "application/x-www-form-urlencoded":
        return Escaping.FORM
    return Escaping.RAW
