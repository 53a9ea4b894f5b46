"""``{{field}}`` templates filled from Recipient fields.

A placeholder names one Recipient field and nothing else: no expressions,
filters, attribute access or code, so ``{{a.__class__}}`` is a syntax error.
Structured vendor payloads (cards, template data) are :class:`JsonTemplate`
values: placeholders live inside JSON strings and the result is serialised with
``json.dumps`` afterwards, so a Recipient value can never break out of its string.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wepush.agent.providers.spi import RecipientRecord, ValidationIssue

from ._config import issue

__all__ = [
    "JsonTemplate",
    "RenderProblem",
    "Template",
    "TemplateSyntaxError",
    "UnknownFieldError",
    "html_escape",
    "recipient_fields",
]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")


class TemplateSyntaxError(ValueError):
    """The template itself is malformed (an invalid message configuration)."""


class UnknownFieldError(KeyError):
    """A placeholder names a field the Recipient does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"recipient has no field {self.name!r}"


class RenderProblem(ValueError):
    """A Recipient cannot be rendered: ``suffix`` picks the error row (e.g. ``RECIPIENT_VALUE_INVALID``)."""

    def __init__(self, suffix: str, message: str) -> None:
        super().__init__(message)
        self.suffix = suffix


def html_escape(text: str) -> str:
    return html.escape(text, quote=True)


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise RenderProblem("RECIPIENT_VALUE_INVALID", f"unsupported recipient value {type(value).__name__}")


def recipient_fields(record: RecipientRecord) -> dict[str, object]:
    """Scalar Recipient fields by name; binary references are not usable as text."""
    out: dict[str, object] = {}
    for name, value in record.fields.items():
        plain = value.plain()
        if plain is None or isinstance(plain, str | int | float | bool):
            out[name] = plain
    return out


@dataclass(frozen=True, slots=True)
class Template:
    """Literal chunks interleaved with field names."""

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
                    "(letters, digits, '_' or '-'); expressions are not supported"
                )
            literals.append(source[position : match.start()])
            variables.append(name)
            position = match.end()
        tail = source[position:]
        if "{{" in tail:
            raise TemplateSyntaxError("unclosed '{{' in template")
        literals.append(tail)
        return cls(tuple(literals), tuple(variables))

    @classmethod
    def checked(cls, source: str, path: str, issues: list[ValidationIssue]) -> Template:
        """Parse, recording a syntax error as an issue at ``path``."""
        try:
            return cls.parse(source)
        except TemplateSyntaxError as exc:
            issues.append(issue(path, "TEMPLATE_INVALID", str(exc)))
            return cls(("",), ())

    def render(self, fields: Mapping[str, object], escape: Callable[[str], str] | None = None) -> str:
        if not self.variables:
            return self.literals[0]
        parts: list[str] = []
        for literal, name in zip(self.literals, self.variables, strict=False):
            parts.append(literal)
            if name not in fields:
                raise UnknownFieldError(name)
            text = _text(fields[name])
            parts.append(escape(text) if escape is not None else text)
        parts.append(self.literals[-1])
        return "".join(parts)


@dataclass(frozen=True, slots=True)
class JsonTemplate:
    """A JSON value whose strings may hold placeholders (object keys stay literal)."""

    value: Any

    @classmethod
    def checked(cls, value: Any, path: str, issues: list[ValidationIssue]) -> JsonTemplate:
        return cls(_parse(value, path, issues))

    @property
    def variables(self) -> frozenset[str]:
        found: set[str] = set()
        _collect(self.value, found)
        return frozenset(found)

    def render(self, fields: Mapping[str, object]) -> Any:
        return _render(self.value, fields)


def _parse(value: Any, path: str, issues: list[ValidationIssue]) -> Any:
    if isinstance(value, str):
        return Template.checked(value, path, issues)
    if isinstance(value, Mapping):
        return {str(k): _parse(v, f"{path}/{k}", issues) for k, v in value.items()}
    if isinstance(value, list):
        return [_parse(v, f"{path}/{i}", issues) for i, v in enumerate(value)]
    return value


def _collect(value: Any, found: set[str]) -> None:
    if isinstance(value, Template):
        found.update(value.variables)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)


def _render(value: Any, fields: Mapping[str, object]) -> Any:
    if isinstance(value, Template):
        return value.render(fields)
    if isinstance(value, dict):
        return {k: _render(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, fields) for v in value]
    return value
