"""The single MetaData of the Service schema and the columns every business table shares."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, ForeignKey, Integer, MetaData, String

from ._types import UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

ID_LENGTH = 36
"""A UUIDv7 in its canonical text form."""


def id_column() -> Column[str]:
    return Column("id", String(ID_LENGTH), primary_key=True)


def workspace_column(*, nullable: bool = False, foreign_key: bool = True) -> Column[str]:
    if foreign_key:
        return Column("workspace_id", String(ID_LENGTH), ForeignKey("workspace.id"), nullable=nullable)
    return Column("workspace_id", String(ID_LENGTH), nullable=nullable)


def ref_column(name: str, target: str | None, *, nullable: bool = False) -> Column[str]:
    """A reference to another row's id; ``target`` is ``"table.id"`` or ``None`` for a soft reference."""
    if target is None:
        return Column(name, String(ID_LENGTH), nullable=nullable)
    return Column(name, String(ID_LENGTH), ForeignKey(target), nullable=nullable)


def audit_columns() -> list[Column[Any]]:
    """``created_at``, ``updated_at`` (UTC) and the optimistic-lock ``version``."""
    return [
        Column("created_at", UtcDateTime(), nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
        Column("version", Integer, nullable=False),
    ]
