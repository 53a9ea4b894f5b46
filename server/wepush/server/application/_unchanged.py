"""An update that changes nothing writes nothing.

Bumping the version for it would make every other editor's next save a VERSION_CONFLICT over no change,
and its audit event would record a modification that did not happen. The client's version is still
checked, so a stale editor conflicts exactly as its write would have.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from wepush.server.domain import VersionConflict

__all__ = ["renamed_fields", "unchanged"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


def renamed_fields(current: _Named, *, name: str, description: str) -> list[str]:
    """Which of a resource's ``name`` and ``description`` an update changes."""
    return [
        field
        for field, old, new in (
            ("name", current.name, name),
            ("description", current.description, description),
        )
        if old != new
    ]


def unchanged(
    resource_type: str, resource_id: str, *, current: int, given: int, changed: Collection[str]
) -> bool:
    """True when the update based on version ``given`` changes none of its fields (``changed`` is empty)
    and the resource is still at that version; a VersionConflict when it is not."""
    if changed:
        return False
    if current != given:
        raise VersionConflict(resource_type, resource_id, given, current=current)
    return True
