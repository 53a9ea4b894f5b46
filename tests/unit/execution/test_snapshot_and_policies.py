"""The frozen run snapshot and the execution-policies JSON shape."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from wepush.agent.engine import ErrorCategory
from wepush.server.application.execution import (
    InvalidPolicies,
    InvalidSnapshot,
    MissingSecret,
    RunSnapshot,
    build_run_snapshot,
    execution_spec,
    item_id_for,
    merge_policies,
    normalize_policies,
    policies_from_json,
    resend_snapshot,
    secret_names,
)
from wepush.server.domain import (
    Account,
    AudienceSnapshot,
    ItemState,
    Job,
    MessageRevision,
    RunState,
    RunTrigger,
    SecretRecord,
)

NOW = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)
SCHEMA_DIR = Path(__file__).resolve().parents[3] / "contracts" / "jsonschema"


def _account(**config: object) -> Account:
    return Account(
        id="acc-1",
        workspace_id="ws-1",
        name="main",
        provider_id="wepush.http",
        provider_version="1.0.0",
        config={
            "baseUrl": "https://api.example.com",
            "auth": {"type": "BEARER", "token": {"$secret": "token"}},
        }
        | config,
        schema_version="1",
        version=4,
        created_at=NOW,
        updated_at=NOW,
    )


def _secret(name: str, version: int) -> SecretRecord:
    return SecretRecord(
        workspace_id="ws-1",
        owner_type="ACCOUNT",
        owner_id="acc-1",
        name=name,
        ciphertext=b"c",
        nonce=b"n",
        encrypted_dek=b"d",
        dek_nonce=b"m",
        algorithm="AES-256-GCM",
        key_version=1,
        record_version=version,
        created_at=NOW,
        updated_at=NOW,
    )


def _inputs() -> dict[str, object]:
    return {
        "job": Job(
            id="job-1",
            workspace_id="ws-1",
            name="weekly",
            account_id="acc-1",
            message_id="msg-1",
            message_revision=3,
            audience_snapshot_id="snap-1",
            policies={"concurrency": {"min": 1, "max": 20, "target": 5}},
            created_at=NOW,
            updated_at=NOW,
        ),
        "account": _account(),
        "message": MessageRevision.of(
            workspace_id="ws-1", message_id="msg-1", revision=3, content={"path": "/notify"}, now=NOW
        ),
        "audience": AudienceSnapshot(
            id="snap-1",
            workspace_id="ws-1",
            audience_id="aud-1",
            revision=2,
            recipient_count=7,
            fields=["mobile"],
            checksum="x",
            created_at=NOW,
            updated_at=NOW,
        ),
        "secret_records": [_secret("token", 3), _secret("unused", 9)],
    }


def test_the_snapshot_freezes_versions_and_secret_references_but_never_secret_values() -> None:
    snapshot = build_run_snapshot(run_id="run-1", **_inputs())  # type: ignore[arg-type]
    doc = snapshot.to_json()

    assert doc["specVersion"] == 1
    assert doc["provider"] == {"id": "wepush.http", "version": "1.0.0"}
    assert doc["account"]["version"] == 4
    assert doc["account"]["secretVersions"] == {"token": 3}
    assert doc["account"]["config"]["auth"]["token"] == {"$secret": "token"}
    assert doc["message"] == {
        "id": "msg-1",
        "revision": 3,
        "schemaVersion": "1",
        "content": {"path": "/notify"},
    }
    assert doc["audience"] == {"snapshotId": "snap-1", "recipientCount": 7}
    assert doc["resendOf"] is None
    assert RunSnapshot.from_json(doc) == snapshot


def test_the_frozen_policies_are_complete_and_valid_against_the_contract_schema() -> None:
    registry_docs = {p.name: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.schema.json")}
    snapshot = build_run_snapshot(run_id="run-1", **_inputs())  # type: ignore[arg-type]
    schema = registry_docs["execution-policies.schema.json"]
    registry: Registry[Any] = Registry().with_resources(
        [(name, Resource.from_contents(doc)) for name, doc in registry_docs.items()]
        + [(doc["$id"], Resource.from_contents(doc)) for doc in registry_docs.values() if "$id" in doc]
    )
    jsonschema.Draft202012Validator(schema, registry=registry).validate(snapshot.policies)
    assert snapshot.policies["concurrency"] == {"min": 1, "max": 20, "target": 5}
    assert snapshot.policies["timeout"]["item"] == "PT30S"


def test_editing_the_inputs_after_the_snapshot_does_not_change_it() -> None:
    inputs = _inputs()
    snapshot = build_run_snapshot(run_id="run-1", **inputs)  # type: ignore[arg-type]
    account = inputs["account"]
    assert isinstance(account, Account)
    account.config["baseUrl"] = "https://changed.example.com"

    assert snapshot.account.config["baseUrl"] == "https://api.example.com"
    assert execution_spec(snapshot).account_config.json()["baseUrl"] == "https://api.example.com"


def test_a_referenced_secret_the_account_lacks_is_refused() -> None:
    inputs = _inputs() | {"secret_records": [_secret("unused", 1)]}
    with pytest.raises(MissingSecret) as refused:
        build_run_snapshot(run_id="run-1", **inputs)  # type: ignore[arg-type]
    assert refused.value.code == "PROVIDER_CONFIG_INVALID"


def test_secret_names_are_found_anywhere_in_the_configuration() -> None:
    config = {"a": {"$secret": "one"}, "list": [{"deep": {"$secret": "two"}}, "x"], "plain": "$secret"}
    assert secret_names(config) == {"one", "two"}


def test_a_resend_snapshot_copies_the_source_and_names_the_outcomes() -> None:
    source = build_run_snapshot(run_id="run-1", **_inputs())  # type: ignore[arg-type]
    resend = resend_snapshot(
        source, run_id="run-2", outcomes={ItemState.UNSENT, ItemState.FAILED}, recipient_count=2
    )
    doc = resend.to_json()

    assert (doc["runId"], doc["trigger"], doc["sourceRunId"]) == ("run-2", "RESEND", "run-1")
    assert doc["resendOf"] == {"runId": "run-1", "outcomes": ["FAILED", "UNSENT"]}
    assert doc["audience"] == {"snapshotId": "snap-1", "recipientCount": 2}
    assert doc["account"] == source.to_json()["account"]
    assert RunSnapshot.from_json(doc) == resend


def test_the_snapshot_makes_the_pending_run_it_belongs_to() -> None:
    snapshot = build_run_snapshot(run_id="run-1", trigger=RunTrigger.SCHEDULE, dry_run=True, **_inputs())  # type: ignore[arg-type]
    run = snapshot.new_run(created_at=NOW, reason="nightly", schedule_id="sch-1")

    assert (run.id, run.state, run.dry_run, run.trigger) == (
        "run-1",
        RunState.PENDING,
        True,
        RunTrigger.SCHEDULE,
    )
    assert (run.account_id, run.message_revision, run.audience_snapshot_id) == ("acc-1", 3, "snap-1")
    assert run.recipient_count == 7
    assert run.snapshot == snapshot.to_json()


@pytest.mark.parametrize(
    "broken",
    [{}, {"specVersion": 2}, {"specVersion": 1, "runId": "r"}],
)
def test_an_unreadable_snapshot_is_refused_with_a_stable_code(broken: dict[str, object]) -> None:
    with pytest.raises(InvalidSnapshot) as refused:
        RunSnapshot.from_json(broken)
    assert refused.value.code == "VALIDATION_FAILED"


def test_policies_map_to_the_engine_including_the_jitter_fraction() -> None:
    policies = policies_from_json(
        {
            "concurrency": {"min": 2, "max": 8, "target": 4},
            "rateLimit": {"permitsPerSecond": 10, "burst": 5},
            "retry": {"maxAttempts": 4, "initialDelay": "PT2S", "jitter": 0.5, "retryOn": ["NETWORK"]},
            "timeout": {"item": "PT60S", "run": "PT1H"},
            "result": {"saveResponseBody": True},
        }
    )

    assert (policies.concurrency.min, policies.concurrency.target, policies.concurrency.max) == (2, 4, 8)
    assert policies.rate_limit.permits_per_second == 10.0
    assert policies.retry.jitter == timedelta(seconds=1)
    assert policies.retry.retry_on == frozenset({ErrorCategory.NETWORK})
    assert policies.timeout.run == timedelta(hours=1)
    assert policies.result.save_response_body is True
    assert normalize_policies(normalize_policies({"retry": {"maxAttempts": 2}})) == normalize_policies(
        {"retry": {"maxAttempts": 2}}
    )


def test_timeouts_are_retried_by_default_where_the_provider_declares_it_safe() -> None:
    """The Service's default left TIMEOUT out, so a WeChat send that timed out (its vendor drops repeats by
    client_msg_id) ended UNKNOWN after one attempt instead of being tried again."""
    assert policies_from_json({}).retry.retry_on == frozenset(
        {
            ErrorCategory.RATE_LIMITED,
            ErrorCategory.TEMPORARY_REMOTE,
            ErrorCategory.NETWORK,
            ErrorCategory.TIMEOUT,
        }
    )
    assert normalize_policies({})["retry"]["retryOn"] == [
        "NETWORK",
        "RATE_LIMITED",
        "TEMPORARY_REMOTE",
        "TIMEOUT",
    ]


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"concurrency": {"min": 5, "max": 2, "target": 3}}, "concurrency.max"),
        ({"retry": {"maxAttempts": 3, "retryOn": ["AUTHENTICATION"]}}, "retry.retryOn"),
        ({"timeout": {"item": "soon"}}, "timeout.item"),
        ({"concurrency": "fast"}, ""),
        # Found by the contract fuzzer as 500s: sizes no timedelta holds.
        ({"retry": {"maxAttempts": 3, "jitter": 2}}, "retry.jitter"),
        ({"retry": {"maxAttempts": 3, "jitter": 1e308, "initialDelay": "P999999999D"}}, "retry.jitter"),
        ({"timeout": {"item": "P9999999999D"}}, "timeout.item"),
        ({"timeout": {"connect": "PT99999999999999999999S"}}, "timeout.connect"),
        (
            {
                "retry": {"maxAttempts": 20, "initialDelay": "P291248511DT924M", "maxDelay": "P999999999D"},
                "timeout": {"item": "PT2M"},
            },
            "retry",
        ),
    ],
)
def test_inconsistent_policies_are_refused_naming_the_field(doc: dict[str, object], path: str) -> None:
    with pytest.raises(InvalidPolicies) as refused:
        policies_from_json(doc)
    assert refused.value.code == "VALIDATION_FAILED"
    assert path in [p for p, _, _ in refused.value.problems]


def test_policy_overrides_merge_member_by_member() -> None:
    merged = merge_policies(
        {"concurrency": {"min": 1, "max": 10, "target": 5}, "retry": {"maxAttempts": 2}},
        {"concurrency": {"target": 8}},
    )
    assert merged == {"concurrency": {"min": 1, "max": 10, "target": 8}, "retry": {"maxAttempts": 2}}


def test_item_ids_are_stable_per_run_snapshot_and_sequence() -> None:
    assert item_id_for("run-1", "snap-1", 5) == item_id_for("run-1", "snap-1", 5)
    assert (
        len(
            {
                item_id_for("run-1", "snap-1", 5),
                item_id_for("run-2", "snap-1", 5),
                item_id_for("run-1", "snap-1", 6),
            }
        )
        == 3
    )
