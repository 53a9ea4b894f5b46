"""The hot-path builders make ordinary frozen instances, indistinguishable from the constructors' ones."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from wepush.agent.engine import (
    ConfigDocument,
    ErrorCategory,
    ItemResult,
    ItemState,
    ProviderSendRequest,
    RecipientRecord,
)
from wepush.agent.engine._hotpath import item_result, send_request

_RECIPIENT = RecipientRecord.of("item-7", 7, {"address": "a@example.test", "n": 3})
_AT = datetime(2026, 1, 1, 8, 30, tzinfo=UTC)


def test_item_result_builder_equals_the_constructor_field_for_field() -> None:
    values = (
        "run-1",
        "item-7",
        7,
        ItemState.FAILED,
        2,
        ErrorCategory.RECIPIENT_INVALID,
        "BAD",
        "no such mailbox",
        "ext-9",
        "{}",
        True,
        _AT,
        _AT,
        _RECIPIENT.fields,
    )
    built = item_result(*values)
    expected = ItemResult(*values)
    assert type(built) is ItemResult
    assert built == expected
    assert repr(built) == repr(expected)
    assert [getattr(built, f.name) for f in dataclasses.fields(ItemResult)] == list(values)
    assert built.to_json_dict() == expected.to_json_dict()
    anonymous = item_result(*values[:-1], None)
    assert pickle.loads(pickle.dumps(anonymous)) == ItemResult(*values[:-1], None)
    assert hash(anonymous) == hash(ItemResult(*values[:-1], None))
    assert dataclasses.replace(built, attempt=3).attempt == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.attempt = 5  # type: ignore[misc]


def test_send_request_builder_equals_the_constructor_field_for_field() -> None:
    config = ConfigDocument.from_json("fake.message", "1", {"text": "hi"})
    values = ("run-1", "item-7", 1, _RECIPIENT, config, "run-1:item-7", _AT)
    built = send_request(*values)
    expected = ProviderSendRequest(*values)
    assert type(built) is ProviderSendRequest
    assert built == expected
    assert repr(built) == repr(expected)
    assert [getattr(built, f.name) for f in dataclasses.fields(ProviderSendRequest)] == list(values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.attempt = 2  # type: ignore[misc]
