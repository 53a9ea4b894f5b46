"""The shared JSON Schemas in contracts/jsonschema are valid, self-consistent and enforce the seed's rules.

Every schema is checked against the draft 2020-12 metaschema, every `$ref` must resolve inside a registry
built from the files alone (no network), one realistic document per schema must pass, and targeted invalid
documents must fail at the field that is wrong.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "contracts" / "jsonschema"
BASE_URI = "https://wepush.dev/schemas/"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

EXPECTED_FILES = {
    "common.schema.json",
    "error-category.schema.json",
    "execution-policies.schema.json",
    "execution-spec.schema.json",
    "run-event.schema.json",
    "run-summary.schema.json",
    "item-result.schema.json",
    "provider-descriptor.schema.json",
    "plugin-manifest.schema.json",
    "config.schema.json",
}

Json = dict[str, Any]


def _load_schemas() -> dict[str, Json]:
    return {
        path.name: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(SCHEMA_DIR.glob("*.schema.json"))
    }


SCHEMAS = _load_schemas()
REGISTRY: Registry[Any] = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema, default_specification=DRAFT202012))
    for schema in SCHEMAS.values()
)


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        SCHEMAS[name], registry=REGISTRY, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def _dotted(path: Iterable[str | int]) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _error_paths(name: str, instance: Any) -> dict[str, list[str]]:
    """Instance path ($.a.b[0], keys unquoted) of every error, nested ones included, with its keyword."""
    found: dict[str, list[str]] = {}
    pending = list(_validator(name).iter_errors(instance))
    while pending:
        error = pending.pop()
        found.setdefault(_dotted(error.absolute_path), []).append(f"{error.validator}: {error.message}")
        pending.extend(error.context or ())
    return found


def _walk(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{pointer}/{index}")


# ------------------------------------------------------------------------------------------------------
# Valid documents, one per schema
# ------------------------------------------------------------------------------------------------------

SHA = "3f" * 32

POLICIES: Json = {
    "concurrency": {"min": 1, "max": 50, "target": 10},
    "rateLimit": {"permitsPerSecond": 20.5, "burst": 5},
    "retry": {
        "maxAttempts": 3,
        "initialDelay": "PT1S",
        "maxDelay": "PT30S",
        "multiplier": 2.0,
        "jitter": 0.2,
        "retryOn": ["RATE_LIMITED", "TEMPORARY_REMOTE", "NETWORK"],
    },
    "timeout": {"item": "PT30S", "run": "PT2H", "connect": "PT5S"},
    "result": {"saveResponseBody": False, "responseBodyMaxBytes": 4096},
    "pause": {"maxPauseDuration": "PT24H", "onPauseTimeout": "CANCEL"},
}

EXECUTION_SPEC: Json = {
    "runId": "01890f6e-7a4b-7cc2-9a3e-2b1f4c5d6e7f",
    "provider": {"id": "wepush.http", "version": "1.0.0"},
    "accountConfig": {
        "schemaId": "wepush.http/account",
        "schemaVersion": "1",
        "mediaType": "application/json",
        "content": {
            "baseUrl": "https://api.example.com",
            "auth": {"type": "BEARER", "token": {"namespace": "account", "name": "token", "version": "3"}},
            "connectTimeout": "PT5S",
        },
    },
    "messageConfig": {
        "schemaId": "wepush.http/message",
        "schemaVersion": "1",
        "mediaType": "application/json",
        "content": {"method": "POST", "path": "/notify", "bodyTemplate": '{"mobile":"{{mobile}}"}'},
    },
    "policies": POLICIES,
    "attributes": {"jobId": "job-1", "trigger": "manual"},
    "dryRun": False,
    "createdAt": "2026-08-22T08:30:00Z",
}

RUN_EVENT: Json = {
    "runId": "run-1",
    "sequence": 121,
    "type": "PROGRESS",
    "occurredAt": "2026-08-22T08:31:00.250Z",
    "data": {
        "total": 1000,
        "succeeded": 300,
        "failed": 2,
        "unknown": 0,
        "unsent": 0,
        "skipped": 1,
        "inFlight": 50,
        "retried": 4,
        "concurrency": 50,
    },
}

RUN_SUMMARY: Json = {
    "runId": "run-1",
    "finalState": "PARTIAL",
    "total": 10,
    "succeeded": 6,
    "failed": 1,
    "unknown": 1,
    "unsent": 1,
    "skipped": 1,
    "retried": 3,
    "startedAt": "2026-08-22T08:30:01Z",
    "endedAt": "2026-08-22T08:31:00Z",
    "artifacts": [
        {"artifactId": "art-1", "type": "SUCCESS", "sha256": SHA, "sizeBytes": 2048, "itemCount": 6},
        {"type": "FAILED", "sha256": SHA, "sizeBytes": 512, "itemCount": 1},
    ],
    "suppressedErrors": [{"stage": "provider.close", "category": "NETWORK", "message": "connection reset"}],
}

ITEM_RESULT: Json = {
    "runId": "run-1",
    "itemId": "run-1:snap-1:42",
    "sequence": 42,
    "state": "FAILED",
    "attempt": 3,
    "attempts": 3,
    "errorCategory": "TEMPORARY_REMOTE",
    "providerCode": "HTTP_503",
    "diagnostic": "upstream answered 503",
    "externalRequestId": "req-9",
    "responseBody": None,
    "responseTruncated": False,
    "startedAt": "2026-08-22T08:30:02Z",
    "finishedAt": "2026-08-22T08:30:03Z",
    "latencyMs": 812,
    "recipient": {"mobile": "13800000000", "name": "Li", "vip": True, "score": 9.5, "note": None},
}

PROVIDER_DESCRIPTOR: Json = {
    "providerId": "wepush.http",
    "displayName": "HTTP",
    "category": "WEBHOOK",
    "description": "Generic HTTP request per recipient.",
    "icon": "icons/http.svg",
    "version": "1.0.0",
    "spiVersion": "1",
    "schemas": {
        "account": "schemas/account.schema.json",
        "message": "schemas/message.schema.json",
        "recipient": "schemas/recipient.schema.json",
        "ui": "schemas/ui.schema.json",
    },
    "capabilities": {
        "preview": True,
        "dryRun": True,
        "idempotency": False,
        "responseBody": True,
        "cancellation": True,
        "safeToRetryOnTimeout": False,
    },
    "concurrencyLimit": None,
    "defaultTimeout": "PT30S",
    "threadSafety": "THREAD_SAFE",
    "platforms": ["any"],
}

PLUGIN_MANIFEST: Json = {
    "pluginId": "acme.sms",
    "version": "2.1.0",
    "spi": {"min": "1", "max": "1"},
    "providers": ["acme.sms", "acme.sms-intl"],
    "publisher": {"name": "ACME Messaging", "url": "https://acme.example"},
    "files": [
        {"path": "acme_sms-2.1.0-py3-none-any.whl", "sha256": SHA, "size": 40960},
        {"path": "providers/acme.sms/provider.json", "sha256": SHA, "size": 812},
    ],
    "signature": {"algorithm": "Ed25519", "keyId": SHA},
}

# The seed's documented example, with a SQLAlchemy URL in place of the Java JDBC URL.
SEED_CONFIG_YAML = """
wepush:
  mode: standalone
  server:
    bind-address: 127.0.0.1
    port: 18990
    public-base-url: http://127.0.0.1:18990
  database:
    type: sqlite
    url: sqlite+aiosqlite:////var/lib/wepush/wepush-next.db
  artifacts:
    type: local
    directory: /var/lib/wepush/artifacts
  secrets:
    type: local-envelope
    master-key-file: /etc/wepush/master.key
  agent:
    embedded:
      enabled: true
      max-runs: 2
      max-concurrency: 200
  security:
    remote-access: false
  events:
    progress-interval: PT1S
    batch-size: 100
"""

SERVER_CONFIG: Json = {
    "wepush": {
        "mode": "server",
        "server": {
            "bind-address": "0.0.0.0",
            "grpc-port": 18991,
            "cors-allowed-origins": ["https://ui.example"],
        },
        "database": {"type": "postgresql", "url": "postgresql+asyncpg://wepush@db/wepush", "pool-size": 20},
        "artifacts": {
            "type": "s3",
            "s3": {"endpoint-url": "http://127.0.0.1:9000", "bucket": "wepush", "presign-ttl": "PT10M"},
        },
        "secrets": {"master-key-env": "WEPUSH_MASTER_KEY"},
        "security": {"remote-access": True},
        "logging": {"level": "WARNING", "format": "text"},
        "plugins": {"trusted-keys": ["A" * 43 + "="], "developer-mode": False},
        "imports": {"max-rows": 500000},
    }
}

VALID_DOCUMENTS: dict[str, Any] = {
    "execution-spec.schema.json": EXECUTION_SPEC,
    "execution-policies.schema.json": POLICIES,
    "run-event.schema.json": RUN_EVENT,
    "run-summary.schema.json": RUN_SUMMARY,
    "item-result.schema.json": ITEM_RESULT,
    "provider-descriptor.schema.json": PROVIDER_DESCRIPTOR,
    "plugin-manifest.schema.json": PLUGIN_MANIFEST,
    "config.schema.json": yaml.safe_load(SEED_CONFIG_YAML),
    "error-category.schema.json": "RATE_LIMITED",
}


# ------------------------------------------------------------------------------------------------------
# Schema files themselves
# ------------------------------------------------------------------------------------------------------


def test_the_expected_schema_files_are_present() -> None:
    assert set(SCHEMAS) == EXPECTED_FILES


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_schema_is_valid_against_the_2020_12_metaschema(name: str) -> None:
    schema = SCHEMAS[name]
    assert schema["$schema"] == DRAFT_2020_12
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_schema_id_matches_its_file_and_title_is_pascal_case(name: str) -> None:
    schema = SCHEMAS[name]
    assert schema["$id"] == BASE_URI + name
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", schema["title"])
    for def_name, definition in schema.get("$defs", {}).items():
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", def_name), def_name
        title = definition.get("title")
        assert title is None or re.fullmatch(r"[A-Z][A-Za-z0-9]*", title), def_name


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_every_reference_resolves_inside_the_registry(name: str) -> None:
    schema = SCHEMAS[name]
    resolver = REGISTRY.resolver(base_uri=schema["$id"])
    refs = [node["$ref"] for _, node in _walk(schema) if isinstance(node, dict) and "$ref" in node]
    for ref in refs:
        assert not ref.startswith(("http:", "https:")), f"{name}: use relative file references, got {ref}"
        resolved = resolver.lookup(ref)
        assert isinstance(resolved.contents, dict), ref


def test_shared_types_are_referenced_not_repeated() -> None:
    for name, schema in SCHEMAS.items():
        if name == "error-category.schema.json":
            continue
        for pointer, node in _walk(schema):
            if isinstance(node, dict) and "enum" in node:
                assert "AUTHENTICATION" not in node["enum"], f"{name}{pointer} repeats ErrorCategory"
            if isinstance(node, dict) and name != "common.schema.json" and "pattern" in node:
                assert not node["pattern"].startswith("^P("), f"{name}{pointer} repeats IsoDuration"


def test_execution_policies_are_a_def_of_the_spec_and_their_own_file() -> None:
    spec = SCHEMAS["execution-spec.schema.json"]
    assert spec["properties"]["policies"] == {"$ref": "#/$defs/ExecutionPolicies"}
    resolved = REGISTRY.resolver(base_uri=spec["$id"]).lookup("#/$defs/ExecutionPolicies")
    assert resolved.contents == {"$ref": "execution-policies.schema.json"}
    assert SCHEMAS["execution-policies.schema.json"]["title"] == "ExecutionPolicies"


# ------------------------------------------------------------------------------------------------------
# Valid documents pass
# ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALID_DOCUMENTS))
def test_valid_document_is_accepted(name: str) -> None:
    assert _error_paths(name, VALID_DOCUMENTS[name]) == {}


def test_server_mode_configuration_is_accepted() -> None:
    assert _error_paths("config.schema.json", SERVER_CONFIG) == {}


def test_minimal_documents_rely_on_declared_defaults() -> None:
    assert _error_paths("config.schema.json", {"wepush": {}}) == {}
    minimal_policies = {
        "concurrency": {"min": 1, "max": 1, "target": 1},
        "rateLimit": {"permitsPerSecond": None},
        "retry": {"maxAttempts": 1},
        "timeout": {},
        "result": {},
    }
    assert _error_paths("execution-policies.schema.json", minimal_policies) == {}


@pytest.mark.parametrize(
    ("state", "attempt", "category"),
    [
        ("SUCCEEDED", 1, None),
        ("UNKNOWN", 1, "TIMEOUT"),
        ("UNSENT", 0, None),
        ("SKIPPED", 0, "RECIPIENT_INVALID"),
    ],
)
def test_item_result_accepts_each_final_state(state: str, attempt: int, category: str | None) -> None:
    line = {**ITEM_RESULT, "state": state, "attempt": attempt, "attempts": attempt, "errorCategory": category}
    assert _error_paths("item-result.schema.json", line) == {}


# ------------------------------------------------------------------------------------------------------
# Invalid documents fail at the offending field
# ------------------------------------------------------------------------------------------------------

Mutation = Callable[[Any], None]


def _set(path: str, value: Any) -> Mutation:
    keys = path.split(".")

    def apply(document: Any) -> None:
        node = document
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[keys[-1]] = value

    return apply


def _delete(path: str) -> Mutation:
    keys = path.split(".")

    def apply(document: Any) -> None:
        node = document
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return apply


INVALID_CASES = [
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.concurrency.min", 0),
        "$.policies.concurrency.min",
        "minimum",
        id="spec-concurrency-min-zero",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.retry.maxAttempts", 21),
        "$.policies.retry.maxAttempts",
        "maximum",
        id="spec-retry-too-many-attempts",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.retry.initialDelay", "30s"),
        "$.policies.retry.initialDelay",
        "pattern",
        id="spec-duration-not-iso",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.timeout.item", 30),
        "$.policies.timeout.item",
        "type",
        id="spec-timeout-bare-integer",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.rateLimit.permitsPerSecond", 0),
        "$.policies.rateLimit.permitsPerSecond",
        "exclusiveMinimum",
        id="spec-rate-limit-zero",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.retry.retryOn", ["SOMETIMES"]),
        "$.policies.retry.retryOn[0]",
        "enum",
        id="spec-retry-on-unknown-category",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("policies.pause.onPauseTimeout", "WAIT"),
        "$.policies.pause.onPauseTimeout",
        "enum",
        id="spec-pause-timeout-action",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("provider.id", "HTTP"),
        "$.provider.id",
        "pattern",
        id="spec-provider-id-uppercase",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("accountConfig.content", "{}"),
        "$.accountConfig.content",
        "type",
        id="spec-config-content-not-object",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("createdAt", "yesterday"),
        "$.createdAt",
        "format",
        id="spec-created-at-not-a-timestamp",
    ),
    pytest.param(
        "execution-spec.schema.json",
        _set("secrets", {"token": "x"}),
        "$",
        "'secrets' was unexpected",
        id="spec-closed-to-secret-values",
    ),
    pytest.param(
        "execution-policies.schema.json",
        _set("retry.jitter", 1.5),
        "$.retry.jitter",
        "maximum",
        id="policies-jitter-above-one",
    ),
    pytest.param(
        "execution-policies.schema.json",
        _set("concurency", {}),
        "$",
        "'concurency' was unexpected",
        id="policies-misspelt-key",
    ),
    pytest.param(
        "execution-policies.schema.json",
        _delete("concurrency.max"),
        "$.concurrency",
        "'max' is a required",
        id="policies-concurrency-needs-a-range",
    ),
    pytest.param(
        "run-event.schema.json",
        _set("type", "RUN_EXPLODED"),
        "$.type",
        "enum",
        id="event-unknown-type",
    ),
    pytest.param(
        "run-event.schema.json",
        _set("sequence", 0),
        "$.sequence",
        "minimum",
        id="event-sequence-starts-at-one",
    ),
    pytest.param(
        "run-event.schema.json",
        _delete("data.inFlight"),
        "$.data",
        "'inFlight' is a required",
        id="event-progress-needs-all-counts",
    ),
    pytest.param(
        "run-event.schema.json",
        _set("data.succeeded", -1),
        "$.data.succeeded",
        "minimum",
        id="event-progress-negative-count",
    ),
    pytest.param(
        "run-summary.schema.json",
        _set("finalState", "RUNNING"),
        "$.finalState",
        "enum",
        id="summary-non-terminal-state",
    ),
    pytest.param(
        "run-summary.schema.json",
        _set("artifacts.0.sha256", SHA.upper()),
        "$.artifacts[0].sha256",
        "pattern",
        id="summary-artifact-digest-uppercase",
    ),
    pytest.param(
        "run-summary.schema.json",
        _set("artifacts.0.type", "RESULTS"),
        "$.artifacts[0].type",
        "enum",
        id="summary-artifact-type",
    ),
    pytest.param(
        "run-summary.schema.json",
        _delete("retried"),
        "$",
        "'retried' is a required",
        id="summary-needs-retried",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("state", "DONE"),
        "$.state",
        "enum",
        id="item-state-done",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("errorCategory", "FLAKY"),
        "$.errorCategory",
        "enum",
        id="item-unknown-category",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("errorCategory", None),
        "$.errorCategory",
        "type",
        id="item-failed-without-category",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("state", "SUCCEEDED"),
        "$.errorCategory",
        "type",
        id="item-succeeded-with-category",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("diagnostic", "x" * 1025),
        "$.diagnostic",
        "maxLength",
        id="item-diagnostic-too-long",
    ),
    pytest.param(
        "item-result.schema.json",
        _set("recipient", {"tags": ["a"]}),
        "$.recipient.tags",
        "type",
        id="item-recipient-field-not-scalar",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("providerId", "HTTP"),
        "$.providerId",
        "pattern",
        id="descriptor-id-uppercase",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("providerId", "http"),
        "$.providerId",
        "pattern",
        id="descriptor-id-single-segment",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("version", "1.0"),
        "$.version",
        "pattern",
        id="descriptor-version-not-semver",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("threadSafety", "PARALLEL"),
        "$.threadSafety",
        "enum",
        id="descriptor-thread-safety",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("schemas.account", "../secrets.json"),
        "$.schemas.account",
        "pattern",
        id="descriptor-schema-path-traversal",
    ),
    pytest.param(
        "provider-descriptor.schema.json",
        _set("capabilities.streaming", True),
        "$.capabilities",
        "'streaming' was unexpected",
        id="descriptor-unknown-capability",
    ),
    pytest.param(
        "plugin-manifest.schema.json",
        _set("files.0.path", "/etc/passwd"),
        "$.files[0].path",
        "pattern",
        id="plugin-absolute-path",
    ),
    pytest.param(
        "plugin-manifest.schema.json",
        _set("files.1.path", "providers/../../x"),
        "$.files[1].path",
        "pattern",
        id="plugin-parent-traversal",
    ),
    pytest.param(
        "plugin-manifest.schema.json",
        _set("signature.algorithm", "RSA"),
        "$.signature.algorithm",
        "const",
        id="plugin-signature-not-ed25519",
    ),
    pytest.param(
        "plugin-manifest.schema.json",
        _set("providers", []),
        "$.providers",
        "minItems",
        id="plugin-without-providers",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.server.prot", 18990),
        "$.wepush.server",
        "'prot' was unexpected",
        id="config-misspelt-server-port",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.agent.embedded.max_runs", 4),
        "$.wepush.agent.embedded",
        "'max_runs' was unexpected",
        id="config-snake-case-key",
    ),
    pytest.param(
        "config.schema.json",
        _set("server", {}),
        "$",
        "'server' was unexpected",
        id="config-section-outside-root",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.mode", "cluster"),
        "$.wepush.mode",
        "enum",
        id="config-unknown-mode",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.server.port", 70000),
        "$.wepush.server.port",
        "maximum",
        id="config-port-out-of-range",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.events.progress-interval", "1s"),
        "$.wepush.events.progress-interval",
        "pattern",
        id="config-duration-not-iso",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.logging.level", "TRACE"),
        "$.wepush.logging.level",
        "enum",
        id="config-log-level",
    ),
    pytest.param(
        "config.schema.json",
        _set("wepush.secrets.master-key-env", "not a name"),
        "$.wepush.secrets.master-key-env",
        "pattern",
        id="config-master-key-env-is-a-variable-name",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "path", "expected"), INVALID_CASES)
def test_invalid_document_is_rejected_at_the_offending_field(
    name: str, mutate: Mutation, path: str, expected: str
) -> None:
    document = copy.deepcopy(VALID_DOCUMENTS[name])
    mutate(document)
    errors = _error_paths(name, document)
    assert path in errors, f"no error at {path}; got {errors}"
    assert any(expected in message for message in errors[path]), errors[path]


def test_error_category_file_is_the_seed_enum() -> None:
    assert SCHEMAS["error-category.schema.json"]["enum"] == [
        "AUTHENTICATION",
        "AUTHORIZATION",
        "INVALID_REQUEST",
        "RECIPIENT_INVALID",
        "RATE_LIMITED",
        "TEMPORARY_REMOTE",
        "PERMANENT_REMOTE",
        "NETWORK",
        "TIMEOUT",
        "CANCELLED",
        "INTERNAL",
        "UNKNOWN",
    ]
    assert _error_paths("error-category.schema.json", "FLAKY") != {}


@pytest.mark.parametrize(
    ("duration", "valid"),
    [
        ("PT1S", True),
        ("PT0.5S", True),
        ("PT1M30S", True),
        ("P1DT12H", True),
        ("P1D", True),
        ("P", False),
        ("PT", False),
        ("P1DT", False),
        ("P1Y", False),
        ("P1W", False),
        ("pt1s", False),
        ("30", False),
    ],
)
def test_iso_duration_accepts_only_unambiguous_durations(duration: str, valid: bool) -> None:
    policies = copy.deepcopy(POLICIES)
    policies["retry"]["maxDelay"] = duration
    assert (_error_paths("execution-policies.schema.json", policies) == {}) is valid


# ------------------------------------------------------------------------------------------------------
# Configuration file rules
# ------------------------------------------------------------------------------------------------------


def _config_objects() -> Iterator[tuple[str, Json]]:
    for pointer, node in _walk(SCHEMAS["config.schema.json"]):
        if isinstance(node, dict) and node.get("type") == "object":
            yield pointer, node


def test_every_config_object_rejects_unknown_keys() -> None:
    objects = list(_config_objects())
    assert len(objects) >= 14
    assert [pointer for pointer, node in objects if node.get("additionalProperties") is not False] == []


def test_config_keys_are_kebab_case() -> None:
    keys = [key for _, node in _config_objects() for key in node.get("properties", {})]
    assert [key for key in keys if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", key)] == []


def _config_default(path: str) -> Any:
    resolver = REGISTRY.resolver(base_uri=SCHEMAS["config.schema.json"]["$id"])
    node: Json = SCHEMAS["config.schema.json"]
    declared: Json = {}
    for key in path.split("."):
        declared = node["properties"][key]
        node = declared
        while "$ref" in node:
            node = resolver.lookup(node["$ref"]).contents
    return declared.get("default", node.get("default"))


@pytest.mark.parametrize(
    ("path", "default"),
    [
        ("wepush.mode", "standalone"),
        ("wepush.server.bind-address", "127.0.0.1"),
        ("wepush.server.port", 18990),
        ("wepush.server.grpc-port", 18991),
        ("wepush.server.max-body-bytes", 10 * 1024 * 1024),
        ("wepush.server.max-upload-bytes", 1024 * 1024 * 1024),
        ("wepush.server.cors-allowed-origins", []),
        ("wepush.agent.embedded.enabled", True),
        ("wepush.agent.embedded.max-runs", 2),
        ("wepush.agent.embedded.max-concurrency", 200),
        ("wepush.security.remote-access", False),
        ("wepush.events.progress-interval", "PT1S"),
        ("wepush.events.batch-size", 100),
        ("wepush.events.sse-heartbeat", "PT15S"),
        ("wepush.logging.level", "INFO"),
        ("wepush.logging.format", "json"),
        ("wepush.plugins.developer-mode", False),
    ],
)
def test_config_declares_the_documented_default(path: str, default: Any) -> None:
    assert _config_default(path) == default


def test_declared_config_defaults_are_themselves_valid() -> None:
    # Build the fully defaulted document from the schema and validate it: a default that violates its own
    # schema would make a fresh install fail to start.
    resolver = REGISTRY.resolver(base_uri=SCHEMAS["config.schema.json"]["$id"])

    def materialise(node: Json) -> Any:
        while "$ref" in node:
            node = resolver.lookup(node["$ref"]).contents
        if node.get("type") != "object":
            raise LookupError
        document: Json = {}
        for key, child in node.get("properties", {}).items():
            try:
                document[key] = materialise(child)
            except LookupError:
                if "default" in child:
                    document[key] = child["default"]
        return document

    defaulted = materialise(SCHEMAS["config.schema.json"])
    assert defaulted["wepush"]["server"]["port"] == 18990
    assert _error_paths("config.schema.json", defaulted) == {}


def test_config_secret_fields_are_marked_for_masking() -> None:
    marked = {
        pointer
        for pointer, node in _walk(SCHEMAS["config.schema.json"])
        if isinstance(node, dict) and node.get("x-wepush-secret") is True
    }
    assert "/$defs/S3Settings/properties/secret-access-key" in marked
    assert "/$defs/DatabaseSettings/properties/url" in marked
