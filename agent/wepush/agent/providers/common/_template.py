"""The ``{{variable}}`` template language every channel provider fills from Recipient fields.

A placeholder names one Recipient field and nothing else. There are no
expressions, filters, attribute or index access and no code execution, so
``{{a.__class__}}`` is a syntax error, not a lookup. Where the text goes decides
its escaping, so ``render`` takes the escape function from the caller (JSON
string fragments, form or path encoding, HTML); this module only fills text in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from wepush.agent.providers.spi import ValidationIssue

__all__ = ["RenderProblem", "Template", "TemplateSyntaxError", "UnknownVariableError", "scalar_text"]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")


class TemplateSyntaxError(ValueError):
    """The template itself is malformed (an invalid message configuration)."""


class UnknownVariableError(KeyError):
    """A placeholder names a field the Recipient does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"recipient has no field {self.name!r}"


class RenderProblem(ValueError):
    """A Recipient cannot be rendered: ``suffix`` picks the error row (e.g. ``RECIPIENT_VALUE_INVALID``).

    Providers name their codes ``<PREFIX>_<suffix>``, so one exception serves every channel.
    """

    def __init__(self, suffix: str, message: str) -> None:
        super().__init__(message)
        self.suffix = suffix


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
            raise RenderProblem("RECIPIENT_VALUE_INVALID", "non-finite number")
        return repr(value)
    raise RenderProblem("RECIPIENT_VALUE_INVALID", f"unsupported recipient value type {type(value).__name__}")


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

    @classmethod
    def checked(cls, source: str, path: str, issues: list[ValidationIssue]) -> Template:
        """Parse, recording a syntax error as a ``TEMPLATE_INVALID`` issue at ``path``."""
        try:
            return cls.parse(source)
        except TemplateSyntaxError as exc:
            issues.append(ValidationIssue(path, "TEMPLATE_INVALID", str(exc)))
            # An empty stand-in lets parsing go on and report every other issue too.
            return cls(("",), ())

    @property
    def is_constant(self) -> bool:
        return not self.variables

    def render(self, fields: Mapping[str, object], escape: Callable[[str], str] | None = None) -> str:
        """Fill in ``fields``; raises :class:`UnknownVariableError` or :class:`RenderProblem`."""
        if not self.variables:
            return self.literals[0]
        parts: list[str] = []
        for literal, name in zip(self.literals, self.variables, strict=False):
            parts.append(literal)
            try:
                # One lookup, not ``in`` then ``[]``: a lazy Mapping may do real work per access.
                value = fields[name]
            except KeyError:
                raise UnknownVariableError(name) from None
            text = scalar_text(value)
            parts.append(text if escape is None else escape(text))
        parts.append(self.literals[-1])
        return "".join(parts)
