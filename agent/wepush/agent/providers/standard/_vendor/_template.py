"""What the standard providers add to the shared ``{{variable}}`` :class:`Template`.

Structured vendor payloads (cards, template data) are :class:`JsonTemplate`
values: placeholders live inside JSON strings and the result is serialised with
``json.dumps`` afterwards, so a Recipient value can never break out of its string.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from wepush.agent.providers.common import Template
from wepush.agent.providers.spi import RecipientRecord, ValidationIssue

__all__ = ["JsonTemplate", "html_escape", "recipient_fields", "render_list", "template_list"]


def html_escape(text: str) -> str:
    return html.escape(text, quote=True)


def recipient_fields(record: RecipientRecord) -> dict[str, object]:
    """Scalar Recipient fields by name; binary references are not usable as text."""
    out: dict[str, object] = {}
    for name, value in record.fields.items():
        plain = value.plain()
        if plain is None or isinstance(plain, str | int | float | bool):
            out[name] = plain
    return out


def template_list(raw: Mapping[str, Any], key: str, issues: list[ValidationIssue]) -> tuple[Template, ...]:
    """The templates listed at ``key`` (none when absent), each checked at ``/key/<index>``."""
    return tuple(Template.checked(v, f"/{key}/{i}", issues) for i, v in enumerate(raw.get(key, [])))


def render_list(templates: Iterable[Template], fields: Mapping[str, object]) -> list[str]:
    """Each template rendered and stripped; a Recipient whose value is empty contributes nothing."""
    return [v for v in (t.render(fields).strip() for t in templates) if v]


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
