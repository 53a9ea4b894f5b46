"""Core value types: canonical configs, secrets, recipients, policies, results and summaries."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime, timedelta

import pytest

import wepush.agent.engine as engine
import wepush.agent.engine.testing as testing
from wepush.agent.engine import (
    BinaryRefValue,
    BooleanValue,
    ConcurrencyPolicy,
    ConfigDocument,
    ErrorCategory,
    ExecutionPolicies,
    ItemResult,
    ItemState,
    MappingSecretResolver,
    NullValue,
    NumberValue,
    ProviderResult,
    RateLimitPolicy,
    RecipientRecord,
    RetryPolicy,
    RunState,
    RunSummary,
    SecretClosedError,
    SecretNotFoundError,
    SecretRef,
    SecretValue,
    TextValue,
    TimeoutPolicy,
    format_duration,
    parse_duration,
)

T0 = datetime(2026, 8, 22, 8, 30, tzinfo=UTC)


def test_every_exported_name_exists() -> None:
    for module in (engine, testing):
        assert len(module.__all__) == len(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), name
    assert {"ExecutionEngine", "RunHandle", "EngineOptions", "JsonlArtifactSink"} <= set(engine.__all__)


def test_config_document_is_canonical_json_regardless_of_key_order() -> None:
    a = ConfigDocument.from_json("s", "1", {"b": 1, "a": {"y": "é", "x": [1, 2]}})
    b = ConfigDocument.from_json("s", "1", {"a": {"x": [1, 2], "y": "é"}, "b": 1})
    assert a == b
    assert a.content == '{"a":{"x":[1,2],"y":"é"},"b":1}'.encode()
    assert a.media_type == "application/json"
    assert a.json() == {"a": {"x": [1, 2], "y": "é"}, "b": 1}


def test_config_document_copies_mutable_content_and_hides_it_from_repr() -> None:
    raw = bytearray(b'{"k":1}')
    doc = ConfigDocument("s", "1", "application/json", raw)  # type: ignore[arg-type]
    raw[0:1] = b"X"
    assert doc.content == b'{"k":1}'
    assert "k" not in repr(doc)


def test_secret_value_is_masked_and_zeroed_on_close() -> None:
    secret = SecretValue("hunter2")
    assert repr(secret) == str(secret) == f"{secret}" == "SecretValue(******)"
    assert "hunter2" not in repr([secret])
    assert secret.copy_str() == "hunter2"
    buffer = secret._buffer
    with secret:
        pass
    assert secret.closed
    assert bytes(buffer) == b"\x00" * 7
    secret.close()  # idempotent
    with pytest.raises(SecretClosedError):
        secret.copy_bytes()
    with pytest.raises(TypeError):
        pickle.dumps(secret)


async def test_mapping_resolver_returns_fresh_values_and_never_names_the_value_when_missing() -> None:
    ref = SecretRef("ns", "api", "3")
    resolver = MappingSecretResolver({ref: b"value-1"})
    first = await resolver.resolve(ref)
    first.close()
    second = await resolver.resolve(ref)
    assert second.copy_bytes() == b"value-1"
    with pytest.raises(SecretNotFoundError) as raised:
        await resolver.resolve(SecretRef("ns", "other"))
    assert "ns/other" in str(raised.value)
    assert "value-1" not in repr(resolver)


def test_recipient_record_round_trips_plain_values_with_bool_kept_apart_from_int() -> None:
    record = RecipientRecord.of(
        "i-1",
        1,
        {"name": "Ann", "age": 31, "vip": True, "score": 1.5, "note": None, "file": BinaryRefValue("s3://f")},
    )
    assert record.fields["name"] == TextValue("Ann")
    assert record.fields["age"] == NumberValue(31)
    assert record.fields["vip"] == BooleanValue(True)
    assert record.fields["note"] == NullValue()
    assert record.plain() == {
        "name": "Ann",
        "age": 31,
        "vip": True,
        "score": 1.5,
        "note": None,
        "file": {"ref": "s3://f"},
    }
    assert record.get("missing") is None
    with pytest.raises(TypeError):
        record.fields["x"] = TextValue("y")  # type: ignore[index]
    with pytest.raises(TypeError):
        RecipientRecord.of("i-2", 2, {"bad": object()})


def test_default_policies_are_consistent() -> None:
    assert ExecutionPolicies.defaults().validate() == []


def test_policy_validation_reports_every_violation_by_path() -> None:
    bad = ExecutionPolicies(
        concurrency=ConcurrencyPolicy(min=0, max=4, target=9),
        rate_limit=RateLimitPolicy(permits_per_second=0, burst=0),
        retry=RetryPolicy(
            max_attempts=6,
            initial_delay=timedelta(seconds=10),
            max_delay=timedelta(seconds=60),
            retry_on=frozenset({ErrorCategory.AUTHENTICATION, ErrorCategory.NETWORK}),
        ),
        timeout=TimeoutPolicy(item=timedelta(seconds=30), run=timedelta(seconds=20)),
    )
    paths = {(v.path, v.code) for v in bad.validate()}
    assert ("concurrency.min", "OUT_OF_RANGE") in paths
    assert ("concurrency.target", "OUT_OF_RANGE") in paths
    assert ("rateLimit.permitsPerSecond", "NOT_POSITIVE") in paths
    assert ("rateLimit.burst", "OUT_OF_RANGE") in paths
    assert ("retry.retryOn", "NOT_RETRYABLE") in paths
    assert ("timeout.item", "EXCEEDS_RUN_TIMEOUT") in paths
    assert ("retry", "EXCEEDS_DEADLINE") in paths


def test_retry_backoff_follows_the_seed_formula() -> None:
    policy = RetryPolicy(initial_delay=timedelta(seconds=1), max_delay=timedelta(seconds=5), multiplier=2)
    assert [policy.backoff(a).total_seconds() for a in (1, 2, 3, 4, 50)] == [1, 2, 4, 5, 5]


@pytest.mark.parametrize(
    ("initial", "maximum", "multiplier", "jitter"),
    [
        (timedelta(days=291_248_511), timedelta(days=999_999_999), 2.0, timedelta(0)),
        (timedelta(seconds=1), timedelta(days=999_999_999), 1e308, timedelta(days=999_999_999)),
        (timedelta(days=999_999_999), timedelta(0), -1.0, timedelta(0)),
    ],
)
def test_retry_delays_of_any_size_are_bounded_not_an_overflow(
    initial: timedelta, maximum: timedelta, multiplier: float, jitter: timedelta
) -> None:
    # Found by the contract fuzzer: such policies were a 500 instead of a validation error.
    policy = RetryPolicy(
        max_attempts=48, initial_delay=initial, max_delay=maximum, multiplier=multiplier, jitter=jitter
    )
    assert all(policy.backoff(attempt) <= maximum for attempt in range(1, 48))
    assert timedelta(0) <= policy.worst_case_total_delay() <= timedelta.max
    timeouts = TimeoutPolicy(item=timedelta(minutes=2), run=None)
    paths = {(v.path, v.code) for v in ExecutionPolicies(retry=policy, timeout=timeouts).validate()}
    assert paths


def test_the_worst_case_delay_saturates_instead_of_overflowing() -> None:
    policy = RetryPolicy(
        max_attempts=20, initial_delay=timedelta(days=999_999_999), max_delay=timedelta(days=999_999_999)
    )
    assert policy.backoff(5) == timedelta(days=999_999_999)
    assert policy.worst_case_total_delay() == timedelta.max


def test_provider_result_failure_redacts_and_caps_the_diagnostic() -> None:
    result = ProviderResult.failure(
        ErrorCategory.AUTHENTICATION,
        "401",
        "Authorization: Bearer abcdef123456 rejected; password=pw1 " + "x" * 5000,
    )
    assert result.diagnostic is not None
    assert "abcdef123456" not in result.diagnostic
    assert "pw1" not in result.diagnostic
    assert len(result.diagnostic) <= 1024
    assert result.retryable is False
    assert ProviderResult.failure(ErrorCategory.NETWORK, "ECONNRESET").retryable is True
    with pytest.raises(ValueError, match="category"):
        ProviderResult(success=False)


def test_item_result_json_line_uses_the_contract_keys() -> None:
    result = ItemResult(
        run_id="r",
        item_id="i",
        sequence=7,
        state=ItemState.FAILED,
        attempt=2,
        error_category=ErrorCategory.RECIPIENT_INVALID,
        provider_code="400",
        diagnostic="bad address",
        started_at=T0,
        finished_at=T0 + timedelta(milliseconds=1250),
        recipient=RecipientRecord.of("i", 7, {"address": "=cmd"}).fields,
    )
    line = result.to_json_line()
    assert "\n" not in line
    data = json.loads(line)
    assert list(data) == [
        "runId",
        "itemId",
        "sequence",
        "state",
        "attempt",
        "errorCategory",
        "providerCode",
        "diagnostic",
        "externalRequestId",
        "responseBody",
        "responseTruncated",
        "startedAt",
        "finishedAt",
        "latencyMs",
        "recipient",
    ]
    assert data["state"] == "FAILED"
    assert data["errorCategory"] == "RECIPIENT_INVALID"
    assert data["startedAt"] == "2026-08-22T08:30:00Z"
    assert data["finishedAt"] == "2026-08-22T08:30:01.250Z"
    assert data["latencyMs"] == 1250
    assert data["recipient"] == {"address": "=cmd"}


def test_run_summary_refuses_counts_that_do_not_add_up() -> None:
    ok = RunSummary("r", RunState.PARTIAL, 5, 2, 1, 1, 1, 0, 3, T0, T0)
    assert ok.counts_consistent
    assert ok.to_json_dict()["finalState"] == "PARTIAL"
    with pytest.raises(ValueError, match="total 5"):
        RunSummary("r", RunState.PARTIAL, 5, 2, 1, 1, 0, 0, 0, T0, T0)


def test_durations_round_trip_in_iso_8601() -> None:
    assert parse_duration("PT30S") == timedelta(seconds=30)
    assert parse_duration("P1DT2H3M4.5S") == timedelta(days=1, hours=2, minutes=3, seconds=4.5)
    assert format_duration(timedelta(milliseconds=1500)) == "PT1.5S"
    for bad in ("30", "PT", "P", "P1Y"):
        with pytest.raises(ValueError, match="ISO-8601"):
            parse_duration(bad)
