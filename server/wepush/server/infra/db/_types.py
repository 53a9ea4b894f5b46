"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from wepush.server.domain import canonical_json


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC instants in, timezone-aware UTC instants out.

    PostgreSQL stores ``timestamptz``. SQLite has no time type: SQLAlchemy stores fixed-width text, so the
    value is converted to UTC and stored without offset; equal-width UTC text sorts and compares correctly.
    Naive datetimes are refused: a naive value has no defined instant.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("naive datetime given where a UTC instant is required")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CanonicalJSON(TypeDecorator[Any]):
    """JSON documents as canonical text (sorted keys, compact separators) where JSONB is unavailable."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else canonical_json(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


JSON_DOCUMENT: TypeEngine[Any] = CanonicalJSON().with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)
"""JSONB on PostgreSQL, canonical JSON TEXT on SQLite. ``None`` is SQL NULL on both."""
