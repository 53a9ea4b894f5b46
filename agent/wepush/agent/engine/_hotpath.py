"""Per-item construction of the frozen result and request types, at a fraction of their ``__init__`` cost.

A frozen dataclass's generated ``__init__`` stores every field through ``object.__setattr__``, which costs
about as much as the rest of the engine's work on an item. These builders fill an instance of a plain
twin class that has exactly the same ``__slots__`` (plain attribute stores) and then turn it into the
frozen class by assigning ``__class__``, which CPython allows between classes of identical layout. The
result is an ordinary instance of the frozen class: equal, hashed, printed and pickled like one built
with its constructor. Neither class has a ``__post_init__`` or a default that a builder could skip; the
engine's tests compare every field with the regular constructor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime

from ._config import ConfigDocument
from ._enums import ErrorCategory, ItemState
from ._provider import ProviderSendRequest
from ._recipients import RecipientRecord, RecipientValue
from ._results import ItemResult

__all__ = ["item_result", "send_request"]

_new = object.__new__


class _ItemResultSlots:
    __slots__ = (
        "attempt",
        "diagnostic",
        "error_category",
        "external_request_id",
        "finished_at",
        "item_id",
        "provider_code",
        "recipient",
        "response_body",
        "response_truncated",
        "run_id",
        "sequence",
        "started_at",
        "state",
    )
    run_id: str
    item_id: str
    sequence: int
    state: ItemState
    attempt: int
    error_category: ErrorCategory | None
    provider_code: str | None
    diagnostic: str | None
    external_request_id: str | None
    response_body: str | None
    response_truncated: bool
    started_at: datetime | None
    finished_at: datetime | None
    recipient: Mapping[str, RecipientValue] | None


class _SendRequestSlots:
    __slots__ = (
        "attempt",
        "deadline",
        "idempotency_key",
        "item_id",
        "message_config",
        "recipient",
        "run_id",
    )
    run_id: str
    item_id: str
    attempt: int
    recipient: RecipientRecord
    message_config: ConfigDocument
    idempotency_key: str
    deadline: datetime | None


def item_result(
    run_id: str,
    item_id: str,
    sequence: int,
    state: ItemState,
    attempt: int,
    error_category: ErrorCategory | None,
    provider_code: str | None,
    diagnostic: str | None,
    external_request_id: str | None,
    response_body: str | None,
    response_truncated: bool,
    started_at: datetime | None,
    finished_at: datetime | None,
    recipient: Mapping[str, RecipientValue] | None,
) -> ItemResult:
    """``ItemResult(...)`` with every field given positionally."""
    built = _new(_ItemResultSlots)
    built.run_id = run_id
    built.item_id = item_id
    built.sequence = sequence
    built.state = state
    built.attempt = attempt
    built.error_category = error_category
    built.provider_code = provider_code
    built.diagnostic = diagnostic
    built.external_request_id = external_request_id
    built.response_body = response_body
    built.response_truncated = response_truncated
    built.started_at = started_at
    built.finished_at = finished_at
    built.recipient = recipient
    built.__class__ = ItemResult  # type: ignore[assignment]
    return built  # type: ignore[return-value]


def send_request(
    run_id: str,
    item_id: str,
    attempt: int,
    recipient: RecipientRecord,
    message_config: ConfigDocument,
    idempotency_key: str,
    deadline: datetime | None,
) -> ProviderSendRequest:
    """``ProviderSendRequest(...)`` with every field given positionally."""
    built = _new(_SendRequestSlots)
    built.run_id = run_id
    built.item_id = item_id
    built.attempt = attempt
    built.recipient = recipient
    built.message_config = message_config
    built.idempotency_key = idempotency_key
    built.deadline = deadline
    built.__class__ = ProviderSendRequest  # type: ignore[assignment]
    return built  # type: ignore[return-value]


def _check_layout(twin: type, frozen: type) -> None:
    """Refuse to import if a frozen type changed without its twin: a builder would leave a field unset."""
    # CPython lays slots out in sorted name order, which is what ``__class__`` assignment compares.
    names = sorted(field.name for field in fields(frozen))
    if sorted(vars(twin)["__slots__"]) != names or sorted(vars(frozen)["__slots__"]) != names:
        raise TypeError(f"{twin.__name__} no longer matches the fields of {frozen.__name__}")
    if hasattr(frozen, "__post_init__"):
        raise TypeError(f"{frozen.__name__} has a __post_init__ that a builder would skip")


_check_layout(_ItemResultSlots, ItemResult)
_check_layout(_SendRequestSlots, ProviderSendRequest)
