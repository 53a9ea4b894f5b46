from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from wepush.server.application.idempotency import (
    IdempotencyConflict,
    IdempotencyKeyInvalid,
    Proceed,
    Replay,
    decide_idempotency,
    key_hash,
    request_fingerprint,
    validate_idempotency_key,
)

PATH = "/api/v1/workspaces/ws-1/jobs/job-1/runs"


@dataclass(frozen=True)
class StoredRecord:
    request_fingerprint: str
    response_status: int
    response_body: Mapping[str, object] | None


def test_fingerprint_ignores_json_key_order_and_whitespace() -> None:
    compact = request_fingerprint(
        "POST", PATH, b'{"dryRun":false,"policyOverrides":{"concurrency":{"target":50}}}'
    )
    spaced = request_fingerprint(
        "post", PATH, b'{ "policyOverrides": {"concurrency": {"target": 50}},\n "dryRun": false }'
    )
    as_object = request_fingerprint(
        "POST", PATH, {"policyOverrides": {"concurrency": {"target": 50}}, "dryRun": False}
    )

    assert compact == spaced == as_object
    assert len(compact) == 64


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", PATH, {"dryRun": False}),
        ("POST", PATH + "x", {"dryRun": False}),
        ("POST", PATH, {"dryRun": True}),
        ("POST", PATH, b"not json"),
    ],
    ids=["method", "path", "body", "raw-body"],
)
def test_fingerprint_changes_with_method_path_or_body(method: str, path: str, body: object) -> None:
    assert request_fingerprint(method, path, body) != request_fingerprint("POST", PATH, {"dryRun": False})


def test_empty_and_missing_bodies_are_the_same_request() -> None:
    assert request_fingerprint("POST", PATH, b"") == request_fingerprint("POST", PATH, None)


def test_key_hash_is_scoped_and_unambiguous() -> None:
    assert key_hash("ws-1:user-1", "key-1") == key_hash("ws-1:user-1", "key-1")
    assert key_hash("ws-1:user-1", "key-1") != key_hash("ws-1:user-2", "key-1")
    assert key_hash("ab", "c") != key_hash("a", "bc")
    assert "key-1" not in key_hash("ws-1", "key-1")


def test_no_record_means_proceed() -> None:
    assert decide_idempotency(None, "f1") == Proceed()


def test_same_fingerprint_replays_the_stored_response() -> None:
    record = StoredRecord("f1", 201, {"runId": "run-1"})

    assert decide_idempotency(record, "f1") == Replay(status=201, body={"runId": "run-1"})


def test_different_fingerprint_is_a_conflict() -> None:
    with pytest.raises(IdempotencyConflict) as caught:
        decide_idempotency(StoredRecord("f1", 201, None), "f2")

    assert caught.value.code == "IDEMPOTENCY_CONFLICT"
    assert caught.value.status == 409


@pytest.mark.parametrize("key", ["20260822-manual-001", "a", "x" * 128])
def test_valid_idempotency_keys(key: str) -> None:
    assert validate_idempotency_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * 129, "has space", "tab\t", "ünicode", "line\nbreak"])
def test_invalid_idempotency_keys(key: str) -> None:
    with pytest.raises(IdempotencyKeyInvalid):
        validate_idempotency_key(key)
