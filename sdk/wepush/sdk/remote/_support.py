"""Small helpers every resource accessor shares: pagination, request bodies, idempotency keys."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from ._errors import FieldError, InvalidRequest, InvalidResponse
from ._session import Session
from ._validation import check_body, guarded

__all__ = [
    "Resource",
    "WorkspaceResource",
    "as_model",
    "iterate_pages",
    "new_idempotency_key",
    "path_segment",
    "utc_instant",
]

#: A generated pydantic model instance, or the same document as a JSON-like mapping (camelCase keys).
Body = Any

M = TypeVar("M")
T_co = TypeVar("T_co", covariant=True)


class _PageInfo(Protocol):
    @property
    def has_more(self) -> bool: ...

    @property
    def next_cursor(self) -> str | None: ...


class _Page(Protocol[T_co]):
    """What every generated ``*Page`` model has: its ``items`` and the ``page`` cursor information."""

    @property
    def items(self) -> Sequence[T_co]: ...

    @property
    def page(self) -> _PageInfo: ...


def new_idempotency_key(given: str | None) -> str:
    """The caller's key, or a fresh one: every replay-safe POST carries a key so network retries are safe."""
    return given if given is not None else str(uuid.uuid4())


def as_model(model: type[M], value: M | Mapping[str, Any]) -> M:
    """Accept either a generated model or a mapping in the wire format, and return the model.

    A mapping is checked as the Service would: an unknown (misspelt) key or a broken rule raises
    :class:`InvalidRequest` naming its JSON pointer, instead of being dropped or quoted.
    """
    if isinstance(value, Mapping):
        return check_body(model, value)
    return value


#: strftime writes a year before 1000 without its leading zeros ("999-01-01"), which is no RFC 3339.
#: The Service wrote every record it holds long after, so as a bound this instant selects the same ones.
_EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)


def utc_instant(argument: str, value: datetime | None) -> datetime | None:
    """A date filter's bound in UTC, the zone the query string writes it in (``...Z``); None stays None.

    A naive datetime is refused rather than guessed: ``datetime.now()`` is local time, and reading it as
    UTC would silently shift the filter by the machine's offset.
    """
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        rule = (
            "must be a timezone-aware datetime, such as datetime.now(UTC) or datetime(2027, 1, 1, tzinfo=UTC)"
        )
        raise InvalidRequest("date filter", [FieldError(field=argument, code="INVALID", message=rule)])
    try:
        return max(value.astimezone(UTC), _EARLIEST)
    except OverflowError:
        rule = "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z once in UTC"
        raise InvalidRequest(
            "date filter", [FieldError(field=argument, code="OUT_OF_RANGE", message=rule)]
        ) from None


def path_segment(value: str) -> str:
    return quote(value, safe="")


def iterate_pages(fetch: Callable[[str | None], _Page[T_co]]) -> Iterator[T_co]:
    """Follow ``page.nextCursor`` until ``hasMore`` is false, yielding every item once."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        info = page.page
        if not info.has_more or not info.next_cursor:
            return
        if info.next_cursor == cursor:
            raise InvalidResponse("the Service returned the same page cursor twice")
        cursor = info.next_cursor


class Resource:
    """Base of the accessors: holds the shared session."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def _api_client(self) -> Any:
        return self._session.api_client

    def _generated(self, api_class: Callable[[Any], M]) -> M:
        """An instance of a generated ``*Api`` whose argument errors are InvalidRequest (one place)."""
        return guarded(api_class(self._session.api_client))


class WorkspaceResource(Resource):
    """Base of the workspace-scoped accessors."""

    def __init__(self, session: Session, workspace_id: str) -> None:
        super().__init__(session)
        self._workspace_id = workspace_id

    @property
    def workspace_id(self) -> str:
        return self._workspace_id

    def _path(self, *segments: str) -> str:
        encoded = "/".join(path_segment(segment) for segment in segments)
        return f"/api/v1/workspaces/{path_segment(self._workspace_id)}/{encoded}"
