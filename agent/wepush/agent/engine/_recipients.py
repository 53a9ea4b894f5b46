"""Recipient records: one row of an audience snapshot, with typed field values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "BinaryRefValue",
    "BooleanValue",
    "NullValue",
    "NumberValue",
    "RecipientRecord",
    "RecipientValue",
    "TextValue",
    "recipient_value",
]


@dataclass(frozen=True, slots=True)
class TextValue:
    value: str

    def plain(self) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class NumberValue:
    value: int | float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or (isinstance(self.value, float) and not math.isfinite(self.value)):
            raise ValueError("a recipient number must be a finite int or float")

    def plain(self) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class BooleanValue:
    value: bool

    def plain(self) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class NullValue:
    @property
    def value(self) -> None:
        return None

    def plain(self) -> Any:
        return None


@dataclass(frozen=True, slots=True)
class BinaryRefValue:
    """A reference to binary content (an artifact or attachment URI), never the bytes themselves."""

    value: str
    media_type: str | None = None

    def plain(self) -> Any:
        out: dict[str, Any] = {"ref": self.value}
        if self.media_type is not None:
            out["mediaType"] = self.media_type
        return out


RecipientValue = TextValue | NumberValue | BooleanValue | NullValue | BinaryRefValue

_NULL = NullValue()
_WRAPPERS: dict[type, type[TextValue | NumberValue | BooleanValue]] = {
    str: TextValue,
    int: NumberValue,
    float: NumberValue,
    bool: BooleanValue,
}


def recipient_value(value: Any) -> RecipientValue:
    """Wrap a plain Python value; ``bool`` is checked before ``int`` because it is a subclass of it."""
    # Audiences are mostly exact str/int/float values: one dict lookup instead of a chain of isinstance.
    wrap = _WRAPPERS.get(type(value))
    if wrap is not None:
        return wrap(value)
    if isinstance(value, TextValue | NumberValue | BooleanValue | NullValue | BinaryRefValue):
        return value
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return BooleanValue(value)
    if isinstance(value, int | float):
        return NumberValue(value)
    if isinstance(value, str):
        return TextValue(value)
    raise TypeError(f"unsupported recipient value type {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class RecipientRecord:
    """One recipient. Field names are case-sensitive."""

    item_id: str
    sequence: int
    fields: Mapping[str, RecipientValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.fields, MappingProxyType):
            object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    @classmethod
    def of(cls, item_id: str, sequence: int, values: Mapping[str, Any] | None = None) -> RecipientRecord:
        return cls(item_id, sequence, {k: recipient_value(v) for k, v in (values or {}).items()})

    def plain(self) -> dict[str, Any]:
        return {name: value.plain() for name, value in self.fields.items()}

    def get(self, name: str) -> Any:
        """The plain value of a field, or ``None`` when it is absent."""
        value = self.fields.get(name)
        return None if value is None else value.plain()
