"""Explicit row ↔ entity mapping. Rows never leave the infra package; repositories return entities.

A :class:`RowMapper` is declared once per entity: which entity field reads which column (``renames``),
which fields are small value objects spread over several columns (``composites``), and which columns the
entity does not carry. Enum-typed fields are converted from their stored strings.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, Generic, TypeVar

from sqlalchemy import Table
from sqlalchemy.engine import RowMapping

E = TypeVar("E")


def _enum_of(hint: Any) -> type[Enum] | None:
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            found = _enum_of(arg)
            if found is not None:
                return found
    return None


class RowMapper(Generic[E]):
    def __init__(
        self,
        entity: type[E],
        table: Table,
        *,
        renames: Mapping[str, str] | None = None,
        composites: Iterable[str] = (),
        skip_fields: Iterable[str] = (),
    ) -> None:
        self._entity = entity
        self._renames = dict(renames or {})
        self._composites: dict[str, type[Any]] = {}
        hints = typing.get_type_hints(entity)
        self._enums: dict[str, type[Enum]] = {}
        self._fields: list[str] = []
        skipped = set(skip_fields)
        composite_names = set(composites)
        for f in dataclasses.fields(entity):  # type: ignore[arg-type]
            if f.name in skipped:
                continue
            if f.name in composite_names:
                self._composites[f.name] = hints[f.name]
                continue
            self._fields.append(f.name)
            enum_type = _enum_of(hints[f.name])
            if enum_type is not None:
                self._enums[f.name] = enum_type
        columns = set(table.c.keys())
        missing = [self.column(name) for name in self._fields if self.column(name) not in columns]
        for composite in self._composites.values():
            missing += [f.name for f in dataclasses.fields(composite) if f.name not in columns]
        if missing:
            raise ValueError(f"{entity.__name__} maps to unknown columns of {table.name}: {missing}")

    def column(self, field_name: str) -> str:
        return self._renames.get(field_name, field_name)

    def to_values(self, entity: E) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in self._fields:
            value = getattr(entity, name)
            values[self.column(name)] = value.value if isinstance(value, Enum) else value
        for name in self._composites:
            values.update(dataclasses.asdict(getattr(entity, name)))
        return values

    def from_row(self, row: RowMapping) -> E:
        kwargs: dict[str, Any] = {}
        for name in self._fields:
            value = row[self.column(name)]
            enum_type = self._enums.get(name)
            kwargs[name] = enum_type(value) if enum_type is not None and value is not None else value
        for name, composite in self._composites.items():
            kwargs[name] = composite(**{f.name: row[f.name] for f in dataclasses.fields(composite)})
        return self._entity(**kwargs)
