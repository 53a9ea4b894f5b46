"""Rich text from provider descriptors, cleaned of dangerous HTML before any client sees it.

A provider's description and the ``title``/``description`` keywords of its JSON Schemas are written by
whoever wrote the provider, a plugin included, and a form renders them next to the operator's data (the
seed: rich text in the OpenAPI documents and UI schemas is cleaned). They keep a few inline formatting
tags and safe links; scripts, event handlers, styles, images and ``javascript:`` URLs are removed, and
a bare ``<`` or ``&`` comes back escaped, so the text is safe to render as HTML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import nh3

__all__ = ["clean_rich_text", "clean_schema_texts"]

_TAGS: Final = frozenset({"a", "b", "br", "code", "em", "i", "li", "ol", "p", "strong", "ul"})
_ATTRIBUTES: Final = {"a": {"href", "title"}}
_URL_SCHEMES: Final = frozenset({"https", "http", "mailto"})
#: The JSON Schema keywords that hold text for people; any other string is data (a pattern, an enum
#: value, a default) and is left exactly as written.
_TEXT_KEYWORDS: Final = frozenset({"title", "description"})


def clean_rich_text(text: str, max_chars: int | None = None) -> str:
    """``text`` as safe HTML. With ``max_chars``, escaping can make it longer than the field allows: then
    it is given as plain text (tags dropped), cut short before an unfinished entity and ended with "…"."""
    cleaned = nh3.clean(text, tags=set(_TAGS), attributes=_ATTRIBUTES, url_schemes=set(_URL_SCHEMES))
    if max_chars is None or len(cleaned) <= max_chars:
        return cleaned
    plain = nh3.clean(text, tags=set())
    if len(plain) <= max_chars:
        return plain
    cut = plain[: max_chars - 1]
    entity = cut.rfind("&")
    if entity != -1 and ";" not in cut[entity:]:
        cut = cut[:entity]
    return cut + "…"


def clean_schema_texts(schema: Any) -> Any:
    """A plain (JSON-ready) copy of ``schema`` with every ``title`` and ``description`` string cleaned.

    Keyed by keyword, not by position: a property *named* ``title`` is a schema (a mapping), never a
    string, so it is walked like any other."""
    if isinstance(schema, Mapping):
        return {
            str(key): clean_rich_text(value)
            if key in _TEXT_KEYWORDS and isinstance(value, str)
            else clean_schema_texts(value)
            for key, value in schema.items()
        }
    if isinstance(schema, (list, tuple)):
        return [clean_schema_texts(item) for item in schema]
    return schema
