"""Case-insensitive substring filters that match the same rows on SQLite and PostgreSQL.

Both sides of the comparison are folded in SQL by :class:`folded`: ``lower()`` on PostgreSQL and, on
SQLite (whose built-in ``lower()`` folds ASCII only), the deterministic function :data:`SQLITE_LOWER`
that every SQLite connection registers (see ``engine.py``). :func:`postgres_lower` is that function: it
lowers one code point at a time with Unicode's simple mapping, which is what PostgreSQL's ``lower()``
does on a UTF-8 database with the default libc provider (checked code point by code point against
PostgreSQL 15 with ``C.UTF-8``). Python's ``str.lower()`` differs in two places only: it maps U+0130
(İ) to two code points and a word-final capital sigma to ``ς``.

The user's text is a literal, not a pattern: ``%``, ``_`` and the escape character are escaped before
the ``LIKE``. It is put in Unicode normal form C first, the form the API stores names in, so "café"
sent with a combining accent finds the name typed with "é" on both databases.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final

from sqlalchemy import ColumnElement, String, literal, or_
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["SQLITE_LOWER", "contains_folded", "escape_like", "folded", "postgres_lower"]

SQLITE_LOWER: Final = "wepush_lower"
"""The name of the Unicode-aware ``lower()`` registered on SQLite connections."""

LIKE_ESCAPE: Final = "\\"

_DOTTED_CAPITAL_I: Final = "\u0130"
_CAPITAL_SIGMA: Final = "\u03a3"


def postgres_lower(value: Any) -> Any:
    """``lower()`` as PostgreSQL computes it on a UTF-8 (libc) database; non-text values pass through."""
    if not isinstance(value, str):
        return value
    if _DOTTED_CAPITAL_I not in value and _CAPITAL_SIGMA not in value:
        return value.lower()
    # One code point at a time: no final-sigma context, and İ maps to i as in UnicodeData.txt.
    return "".join("i" if ch == _DOTTED_CAPITAL_I else ch.lower() for ch in value)


class folded(FunctionElement[str]):
    """``lower(x)`` with the same Unicode folding on both databases."""

    type = String()
    name = "folded"
    inherit_cache = True


@compiles(folded)
def _folded_default(element: folded, compiler: SQLCompiler, **kw: Any) -> str:
    return f"lower({compiler.process(element.clauses, **kw)})"


@compiles(folded, "sqlite")
def _folded_sqlite(element: folded, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{SQLITE_LOWER}({compiler.process(element.clauses, **kw)})"


def escape_like(text: str) -> str:
    """``text`` as a LIKE pattern that matches itself only (escape character: backslash)."""
    return (
        text.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2)
        .replace("%", LIKE_ESCAPE + "%")
        .replace("_", LIKE_ESCAPE + "_")
    )


def contains_folded(column: ColumnElement[str], text: str) -> ColumnElement[bool]:
    """``column`` contains ``text`` in NFC, ignoring case: ``lower(column) LIKE lower('%text%') ESCAPE '\\'``.

    Names are stored in NFC (the API composes a request's ``name``), so a filter sent decomposed
    ("cafe" + U+0301) would otherwise miss every name it looks like. Normalising here, not where the
    request is read, keeps the filter a paging cursor is bound to the one the client sends."""
    composed = unicodedata.normalize("NFC", text)
    matches = _contains_literally(column, composed)
    if composed == text:
        return matches
    # A name stored before names were put in NFC may still be decomposed: the text as sent finds it.
    return or_(matches, _contains_literally(column, text))


def _contains_literally(column: ColumnElement[str], text: str) -> ColumnElement[bool]:
    pattern = literal(f"%{escape_like(text)}%", String())
    return folded(column).like(folded(pattern), escape=LIKE_ESCAPE)
