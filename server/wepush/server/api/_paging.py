"""Opaque, HMAC-protected cursors bound to resource and filters, and the page envelope."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from wepush.server.api._context import services
from wepush.server.application.paging import CursorInvalid, validate_limit
from wepush.server.domain import Keyset, Page, PageRequest

T = TypeVar("T")


def keyset_request(
    resource: str, filters: Mapping[str, object], limit: int | None, cursor: str | None
) -> PageRequest[Keyset]:
    size = validate_limit(limit)
    if not cursor:
        return PageRequest(limit=size)
    at, row_id = services().cursors.decode_keyset(cursor, resource=resource, filters=filters)
    return PageRequest(limit=size, after=Keyset(at=at, id=row_id))


def sequence_request(
    resource: str, filters: Mapping[str, object], limit: int | None, cursor: str | None
) -> PageRequest[int]:
    size = validate_limit(limit)
    if not cursor:
        return PageRequest(limit=size)
    position = services().cursors.decode(cursor, resource=resource, filters=filters)
    if len(position) != 1 or not isinstance(position[0], int):
        raise CursorInvalid("malformed")
    return PageRequest(limit=size, after=position[0])


def page_body(
    page: Page[T, Any],
    render: Callable[[T], dict[str, Any]],
    *,
    resource: str,
    filters: Mapping[str, object],
) -> dict[str, Any]:
    """``{"items": [...], "page": {"nextCursor", "hasMore"}}`` with a cursor for ``page.next_after``."""
    cursor: str | None = None
    after = page.next_after
    if isinstance(after, Keyset):
        cursor = services().cursors.encode_keyset(
            resource=resource, filters=filters, at=after.at, id=after.id
        )
    elif isinstance(after, int):
        cursor = services().cursors.encode(resource=resource, filters=filters, position=(after,))
    return {
        "items": [render(item) for item in page.items],
        "page": {"nextCursor": cursor, "hasMore": cursor is not None},
    }
