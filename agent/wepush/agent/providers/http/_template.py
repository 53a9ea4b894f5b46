"""``{{variable}}`` templates rendered from Recipient fields.

The language is deliberately tiny: a placeholder names one Recipient field and
nothing else. There are no expressions, filters, attribute or index access and
no code execution, so ``{{a.__class__}}`` is a syntax error, not a lookup.

Escaping depends on where the text goes (:class:`Escaping`): inside a JSON
document a value is inserted as a JSON string-escaped fragment (the template
supplies the surrounding quotes), in a form body it is percent-encoded, and in a
URL path segment it is percent-encoded with ``/`` escaped so a value can never
add path segments.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from urllib.parse import quote, quote_plus

__all__ = [
    "Escaping",
    "Template",
    "TemplateSyntaxError",
    "UnknownVariableError",
    "escaping_for_content_type",
    "scalar_text",
]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")


class Escaping(enum.Enum):
    JSON_STRING = "json-string"
    FORM = "form"
    PATH_SEGMENT = "path-segment"
    RAW = "raw"


class TemplateSyntaxError(ValueError):
    """The template itself is malformed (an invalid request configuration)."""


class UnknownVariableError(KeyError):
    """A placeholder names a field the Recipient does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"recipient has no field {self.name!r}"


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


def scalar_text(value: object) -> str:
    """Text form of a Recipient field value (str, int, float, bool or None)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite number")
        return repr(value)
    raise TypeError(f"unsupported recipient value type {type(value).__name__}")


def _escape(text: str, escaping: Escaping) -> str:
    if escaping is Escaping.JSON_STRING:
        # The C encoder behind json.dumps(ensure_ascii=False): it escapes quotes,
        # backslashes and every control character and leaves other text readable.
        return str(encode_basestring(text))[1:-1]
    if escaping is Escaping.FORM:
        return quote_plus(text, safe="")
    if escaping is Escaping.PATH_SEGMENT:
        if text in {".", ".."}:
            # Dot segments would be collapsed by URL normalisation and walk the path.
            raise ValueError("a dot segment cannot be used in a URL path")
        return quote(text, safe="")
    return text


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal chunks interleaved with variable names."""

    literals: tuple[str, ...]
    variables: tuple[str, ...]

    @classmethod
    def parse(cls, source: str) -> Template:
        literals: list[str] = []
        variables: list[str] = []
        position = 0
        for match in _PLACEHOLDER.finditer(source):
            name = match.group(1).strip()
            if not _NAME.fullmatch(name):
                raise TemplateSyntaxError(
                    f"placeholder at offset {match.start()} must name one recipient field "
                    "(letters, digits, '_' or '-'); expressions and attribute access are not supported"
                )
            literals.append(source[position : match.start()])
            variables.append(name)
            position = match.end()
        tail = source[position:]
        if "{{" in tail:
            # A lone "}}" is ordinary JSON (nested objects); a lone "{{" is a typo.
            raise TemplateSyntaxError("unclosed '{{' in template")
        literals.append(tail)
        return cls(tuple(literals), tuple(variables))

    @property
    def is_constant(self) -> bool:
        return not self.variables

    def render(self, fields: Mapping[str, object], escaping: Escaping) -> str:
        """Render with ``fields``; raises :class:`UnknownVariableError` for a missing field."""
        if not self.variables:
            return self.literals[0]
        parts: list[str] = []
        for literal, name in zip(self.literals, self.variables, strict=False):
            parts.append(literal)
            try:
                value = fields[name]
            except KeyError:
                raise UnknownVariableError(name) from None
            parts.append(_escape(scalar_text(value), escaping))
        parts.append(self.literals[-1])
        return "".join(parts)
