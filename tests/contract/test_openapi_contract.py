"""The v1 REST contract is complete, valid OpenAPI 3.0.3 and follows the split-file conventions.

The contract in ``contracts/openapi`` is the source for the generated server models, the Python and
TypeScript clients and Connexion's run-time validation, so these tests pin what every consumer relies on:
which operations exist and which handler module serves them, the error and pagination envelopes,
idempotency headers, and that examples carry placeholders rather than anything resembling a secret.
"""

from __future__ import annotations

import functools
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from openapi_spec_validator import validate

CONTRACT_DIR = pathlib.Path(__file__).resolve().parents[2] / "contracts" / "openapi"
ROOT_FILE = CONTRACT_DIR / "openapi.yaml"

API_MODULES = frozenset(
    {
        "workspaces",
        "providers",
        "accounts",
        "messages",
        "audiences",
        "jobs",
        "runs",
        "schedules",
        "agents",
        "tokens",
        "audit",
        "health",
        "agent_internal",
    }
)
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
PROBLEM_MEDIA_TYPE = "application/problem+json"

_WS = "/api/v1/workspaces/{workspaceId}"

# (method, path, operationId, handler module). The handler is snake_case(operationId) in
# wepush.server.api.<module>; renaming an operation breaks the server, the SDK and the clients.
REQUIRED_OPERATIONS: tuple[tuple[str, str, str, str], ...] = (
    ("get", "/api/v1/workspaces", "listWorkspaces", "workspaces"),
    ("post", "/api/v1/workspaces", "createWorkspace", "workspaces"),
    ("get", _WS, "getWorkspace", "workspaces"),
    ("put", _WS, "updateWorkspace", "workspaces"),
    ("get", _WS + "/members", "listWorkspaceMembers", "workspaces"),
    ("put", _WS + "/members/{userId}", "putWorkspaceMemberRole", "workspaces"),
    ("delete", _WS + "/members/{userId}", "deleteWorkspaceMember", "workspaces"),
    ("get", "/api/v1/providers", "listProviders", "providers"),
    ("get", "/api/v1/providers/{providerId}", "getProvider", "providers"),
    ("get", "/api/v1/providers/{providerId}/schemas", "getProviderSchemas", "providers"),
    ("get", _WS + "/accounts", "listAccounts", "accounts"),
    ("post", _WS + "/accounts", "createAccount", "accounts"),
    ("get", _WS + "/accounts/{accountId}", "getAccount", "accounts"),
    ("put", _WS + "/accounts/{accountId}", "updateAccount", "accounts"),
    ("delete", _WS + "/accounts/{accountId}", "deleteAccount", "accounts"),
    ("post", _WS + "/accounts/{accountId}/connection-test", "testAccountConnection", "accounts"),
    ("get", _WS + "/messages", "listMessages", "messages"),
    ("post", _WS + "/messages", "createMessage", "messages"),
    ("get", _WS + "/messages/{messageId}", "getMessage", "messages"),
    ("put", _WS + "/messages/{messageId}", "updateMessage", "messages"),
    ("delete", _WS + "/messages/{messageId}", "deleteMessage", "messages"),
    ("get", _WS + "/messages/{messageId}/revisions", "listMessageRevisions", "messages"),
    ("post", _WS + "/messages/{messageId}/revisions", "createMessageRevision", "messages"),
    ("get", _WS + "/messages/{messageId}/revisions/{revision}", "getMessageRevision", "messages"),
    ("get", _WS + "/audiences", "listAudiences", "audiences"),
    ("post", _WS + "/audiences", "createAudience", "audiences"),
    ("get", _WS + "/audiences/{audienceId}", "getAudience", "audiences"),
    ("put", _WS + "/audiences/{audienceId}", "updateAudience", "audiences"),
    ("delete", _WS + "/audiences/{audienceId}", "deleteAudience", "audiences"),
    ("post", _WS + "/audiences/{audienceId}/imports", "createAudienceImport", "audiences"),
    ("get", _WS + "/audiences/{audienceId}/imports", "listAudienceImports", "audiences"),
    ("get", _WS + "/audiences/{audienceId}/imports/{importId}", "getAudienceImport", "audiences"),
    (
        "put",
        _WS + "/audiences/{audienceId}/imports/{importId}/content",
        "uploadAudienceImportContent",
        "audiences",
    ),
    (
        "get",
        _WS + "/audiences/{audienceId}/imports/{importId}/preview",
        "getAudienceImportPreview",
        "audiences",
    ),
    (
        "get",
        _WS + "/audiences/{audienceId}/imports/{importId}/errors",
        "downloadAudienceImportErrors",
        "audiences",
    ),
    ("post", _WS + "/audiences/{audienceId}/imports/{importId}/commit", "commitAudienceImport", "audiences"),
    (
        "post",
        _WS + "/audiences/{audienceId}/imports/{importId}/discard",
        "discardAudienceImport",
        "audiences",
    ),
    ("get", _WS + "/audiences/{audienceId}/snapshots", "listAudienceSnapshots", "audiences"),
    ("get", _WS + "/audience-snapshots/{snapshotId}", "getAudienceSnapshot", "audiences"),
    (
        "get",
        _WS + "/audience-snapshots/{snapshotId}/recipients",
        "listAudienceSnapshotRecipients",
        "audiences",
    ),
    ("get", _WS + "/jobs", "listJobs", "jobs"),
    ("post", _WS + "/jobs", "createJob", "jobs"),
    ("get", _WS + "/jobs/{jobId}", "getJob", "jobs"),
    ("put", _WS + "/jobs/{jobId}", "updateJob", "jobs"),
    ("delete", _WS + "/jobs/{jobId}", "deleteJob", "jobs"),
    ("post", _WS + "/jobs/{jobId}/run-confirmation", "createRunConfirmation", "runs"),
    ("post", _WS + "/jobs/{jobId}/runs", "startRun", "runs"),
    ("get", _WS + "/runs", "listRuns", "runs"),
    ("get", _WS + "/runs/{runId}", "getRun", "runs"),
    ("get", _WS + "/runs/{runId}/items", "listRunItems", "runs"),
    ("post", _WS + "/runs/{runId}/commands/pause", "pauseRun", "runs"),
    ("post", _WS + "/runs/{runId}/commands/resume", "resumeRun", "runs"),
    ("post", _WS + "/runs/{runId}/commands/cancel", "cancelRun", "runs"),
    ("post", _WS + "/runs/{runId}/commands/change-concurrency", "changeRunConcurrency", "runs"),
    ("get", _WS + "/runs/{runId}/commands/{commandId}", "getRunCommand", "runs"),
    ("get", _WS + "/runs/{runId}/events", "streamRunEvents", "runs"),
    ("get", _WS + "/runs/{runId}/event-log", "listRunEvents", "runs"),
    ("get", _WS + "/runs/{runId}/artifacts", "listRunArtifacts", "runs"),
    ("get", _WS + "/runs/{runId}/artifacts/{artifactId}/content", "downloadRunArtifact", "runs"),
    ("post", _WS + "/runs/{runId}/resend-confirmation", "createResendConfirmation", "runs"),
    ("post", _WS + "/runs/{runId}/resend", "resendRun", "runs"),
    ("get", _WS + "/schedules", "listSchedules", "schedules"),
    ("post", _WS + "/schedules", "createSchedule", "schedules"),
    ("get", _WS + "/schedules/{scheduleId}", "getSchedule", "schedules"),
    ("put", _WS + "/schedules/{scheduleId}", "updateSchedule", "schedules"),
    ("delete", _WS + "/schedules/{scheduleId}", "deleteSchedule", "schedules"),
    ("get", "/api/v1/agents", "listAgents", "agents"),
    ("get", "/api/v1/agents/{agentId}", "getAgent", "agents"),
    ("post", "/api/v1/agents/enrollment-tokens", "createEnrollmentToken", "agents"),
    ("post", "/api/v1/agents/{agentId}/disable", "disableAgent", "agents"),
    ("post", "/api/v1/agents/{agentId}/credential-rotation", "rotateAgentCredential", "agents"),
    ("get", _WS + "/api-tokens", "listApiTokens", "tokens"),
    ("post", _WS + "/api-tokens", "createApiToken", "tokens"),
    ("delete", _WS + "/api-tokens/{tokenId}", "revokeApiToken", "tokens"),
    ("get", _WS + "/audit-events", "listAuditEvents", "audit"),
    ("get", "/api/v1/audit-events", "listSystemAuditEvents", "audit"),
    ("get", "/health/live", "getLiveness", "health"),
    ("get", "/health/ready", "getReadiness", "health"),
    ("get", "/api/v1/system/info", "getSystemInfo", "health"),
    ("get", "/metrics", "getMetrics", "health"),
    ("post", "/internal/agent/v1/enroll", "enrollAgent", "agent_internal"),
    ("get", "/internal/agent/v1/leases/{leaseId}/snapshot", "getLeaseSnapshot", "agent_internal"),
    ("get", "/internal/agent/v1/leases/{leaseId}/audience", "getLeaseAudience", "agent_internal"),
    (
        "post",
        "/internal/agent/v1/leases/{leaseId}/artifacts/upload-plan",
        "createArtifactUploadPlan",
        "agent_internal",
    ),
    (
        "put",
        "/internal/agent/v1/leases/{leaseId}/artifacts/{artifactId}/content",
        "uploadLeaseArtifactContent",
        "agent_internal",
    ),
    (
        "post",
        "/internal/agent/v1/leases/{leaseId}/artifacts/{artifactId}/commit",
        "commitLeaseArtifact",
        "agent_internal",
    ),
)

# Creating operations whose response carries a plaintext credential shown once. Replaying them from an
# idempotency record would mean storing that plaintext, so they deliberately take no Idempotency-Key.
SECRET_ISSUING_OPERATIONS = frozenset({"createApiToken", "createEnrollmentToken", "enrollAgent"})
# Starting or resending a run must be safe to retry, so the key is mandatory there.
IDEMPOTENCY_KEY_REQUIRED = frozenset({"startRun", "resendRun"})
# Readiness reports failing checks in its own body rather than as a problem.
NON_PROBLEM_ERRORS = frozenset({("getReadiness", "503")})

REQUIRED_PROBLEM_CODES = frozenset(
    {
        "VALIDATION_FAILED",
        "AUTHENTICATION_REQUIRED",
        "ACCESS_DENIED",
        "RESOURCE_NOT_FOUND",
        "VERSION_CONFLICT",
        "IDEMPOTENCY_CONFLICT",
        "PROVIDER_NOT_AVAILABLE",
        "PROVIDER_CONFIG_INVALID",
        "RUN_STATE_CONFLICT",
        "AGENT_NOT_AVAILABLE",
        "LEASE_EXPIRED",
        "ARTIFACT_NOT_READY",
        "RATE_LIMITED",
        "INTERNAL_ERROR",
        "NOT_IMPLEMENTED",
        "CONFIRMATION_REQUIRED",
        "CONFIRMATION_INVALID",
        "CURSOR_INVALID",
        "CURSOR_EXPIRED",
        "PAYLOAD_TOO_LARGE",
        "IMPORT_LIMIT_EXCEEDED",
        "RESOURCE_IN_USE",
    }
)

_CAMEL_CASE = re.compile(r"^[a-z][a-zA-Z0-9]*$")
_PASCAL_CASE = re.compile(r"^[A-Z][a-zA-Z0-9]*$")
_SPLIT_REF = re.compile(
    r"^\.\./openapi\.yaml#/components/(schemas|parameters|responses|headers)/[A-Z][A-Za-z0-9]*$"
)
_ROOT_LEVEL_REF = re.compile(
    r"^openapi\.yaml#/components/(schemas|parameters|responses|headers)/[A-Z][A-Za-z0-9]*$"
)
_LONG_HEX = re.compile(r"[0-9a-fA-F]{21,}")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_\-]{21,}")
_KNOWN_SECRET_MARKERS = ("-----BEGIN", "AKIA", "sk_live_", "xoxb-", "ghp_")
_URL = re.compile(r"https?://([^/\s\"'<>:]+)")
# RFC 2606 names: the .example top-level domain and the example second-level domains.
_PLACEHOLDER_HOSTS = (".example", "example.com", "example.org", "example.net")


# ------------------------------------------------------------------------------------------ loading


@functools.cache
def _load(path: pathlib.Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _contract_files() -> list[pathlib.Path]:
    return sorted(CONTRACT_DIR.rglob("*.yaml"))


def _pointer(document: Any, fragment: str) -> Any:
    node = document
    for part in fragment.strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _deref(node: Any, base: pathlib.Path) -> tuple[Any, pathlib.Path]:
    """Follow `$ref` chains across files; returns the target node and the file it lives in."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        target, _, fragment = node["$ref"].partition("#")
        base = (base.parent / target).resolve() if target else base
        node = _pointer(_load(base), fragment)
        seen += 1
        assert seen < 16, f"reference cycle at {base}#{fragment}"
    return node, base


Operation = tuple[str, str, dict[str, Any], pathlib.Path]


@functools.cache
def _operations() -> tuple[Operation, ...]:
    """Every (path, method, operation, file holding the path item) of the root document."""
    found: list[Operation] = []
    for path, ref in _load(ROOT_FILE)["paths"].items():
        item, item_file = _deref(ref, ROOT_FILE)
        for method in HTTP_METHODS:
            if method in item:
                found.append((path, method, item[method], item_file))
    return tuple(found)


def _operation(path: str, method: str) -> tuple[dict[str, Any], pathlib.Path]:
    for op_path, op_method, operation, item_file in _operations():
        if (op_path, op_method) == (path, method):
            return operation, item_file
    raise AssertionError(f"{method.upper()} {path} is missing from the contract")


def _path_item(path: str) -> tuple[dict[str, Any], pathlib.Path]:
    item, item_file = _deref(_load(ROOT_FILE)["paths"][path], ROOT_FILE)
    assert isinstance(item, dict)
    return item, item_file


def _parameters(path: str, method: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Effective parameters (path-item level overridden by operation level), resolved."""
    item, item_file = _path_item(path)
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*item.get("parameters", []), *item[method].get("parameters", [])]:
        param, _ = _deref(raw, item_file)
        merged[(param["in"], param["name"])] = param
    return merged


def _schema(node: Any, base: pathlib.Path) -> dict[str, Any]:
    schema, _ = _deref(node, base)
    assert isinstance(schema, dict)
    return schema


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Yield (key, value) for every mapping entry in a YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for entry in node:
            yield from _walk(entry)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for entry in node:
            yield from _strings(entry)


def _inline(node: Any, base: pathlib.Path, depth: int = 0) -> Any:
    """`node` with every reference replaced by its target; the contract has no recursive schemas.

    Discriminators are dropped: their mappings name split-file targets, and `oneOf` alone already decides.
    """
    assert depth < 64, f"unexpectedly deep or recursive schema in {base.name}"
    if isinstance(node, dict):
        if "$ref" in node:
            target, target_file = _deref(node, base)
            return _inline(target, target_file, depth + 1)
        return {
            key: value if key in ("example", "examples") else _inline(value, base, depth + 1)
            for key, value in node.items()
            if key != "discriminator"
        }
    if isinstance(node, list):
        return [_inline(entry, base, depth + 1) for entry in node]
    return node


_SCHEMA_KEYS = frozenset({"type", "properties", "additionalProperties", "allOf", "oneOf", "anyOf", "enum"})


def _examples_with_schemas(node: Any) -> Iterator[tuple[Any, Any]]:
    """(example, schema) pairs: schema-level examples and examples of parameters, headers and media types."""
    if isinstance(node, dict):
        if "example" in node:
            if "schema" in node:
                yield node["example"], node["schema"]
            elif _SCHEMA_KEYS & set(node):
                yield node["example"], {key: value for key, value in node.items() if key != "example"}
        for value in node.values():
            yield from _examples_with_schemas(value)
    elif isinstance(node, list):
        for entry in node:
            yield from _examples_with_schemas(entry)


def _looks_like_secret(text: str) -> bool:
    """Long hex or mixed-case base64-like runs, or well-known credential prefixes (placeholders excluded)."""
    if any(marker in text for marker in _KNOWN_SECRET_MARKERS):
        return True
    stripped = re.sub(r"<[^<>]*>", "", text)
    if _LONG_HEX.search(stripped):
        return True
    for run in _TOKEN_RUN.findall(stripped):
        if re.search(r"\d", run) and re.search(r"[a-z]", run) and re.search(r"[A-Z]", run):
            return True
    return False


def _uses_placeholder_hosts_only(text: str) -> bool:
    return all(host.endswith(_PLACEHOLDER_HOSTS) for host in _URL.findall(text))


# ------------------------------------------------------------------------------------------ document


def test_root_document_is_valid_openapi_3_0_3_with_all_file_references_resolved() -> None:
    root = _load(ROOT_FILE)
    assert root["openapi"] == "3.0.3"
    assert root["info"]["title"] == "WePush Next API"
    assert root["info"]["version"] == "1.0.0"
    assert root["servers"] == [{"url": "/"}]
    assert root["security"] == [{"ApiToken": []}]
    validate(root, base_uri=ROOT_FILE.as_uri())


def test_validator_rejects_a_contract_with_a_dangling_reference(tmp_path: pathlib.Path) -> None:
    # Guards the test above: relative file references are really followed, not silently skipped.
    broken = tmp_path / "openapi"
    for source in _contract_files():
        target = broken / source.relative_to(CONTRACT_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    runs = broken / "paths" / "runs.yaml"
    runs.write_text(
        runs.read_text(encoding="utf-8").replace("schemas/RunAccepted'", "schemas/NoSuchSchema'"),
        encoding="utf-8",
    )
    broken_root = broken / "openapi.yaml"
    with pytest.raises(Exception, match="NoSuchSchema"):
        validate(yaml.safe_load(broken_root.read_text(encoding="utf-8")), base_uri=broken_root.as_uri())


def test_security_schemes_bind_to_the_server_security_functions() -> None:
    schemes = _load(ROOT_FILE)["components"]["securitySchemes"]
    expected: dict[str, dict[str, str]] = {
        "ApiToken": {
            "type": "http",
            "scheme": "bearer",
            "x-bearerInfoFunc": "wepush.server.api.security.api_token_info",
        },
        "AgentCredential": {
            "type": "apiKey",
            "in": "header",
            "name": "X-WePush-Agent-Credential",
            "x-apikeyInfoFunc": "wepush.server.api.security.agent_credential_info",
        },
        "EnrollmentToken": {
            "type": "apiKey",
            "in": "header",
            "name": "X-WePush-Enrollment-Token",
            "x-apikeyInfoFunc": "wepush.server.api.security.enrollment_token_info",
        },
    }
    assert set(schemes) == set(expected)
    for name, fields in expected.items():
        assert {key: schemes[name].get(key) for key in fields} == fields, name


# ------------------------------------------------------------------------------------------ file conventions


def test_every_root_path_is_a_reference_to_a_path_item_file() -> None:
    for path, ref in _load(ROOT_FILE)["paths"].items():
        assert list(ref) == ["$ref"], path
        target, _, key = ref["$ref"].partition("#/")
        assert re.fullmatch(r"paths/[a-z_]+\.yaml", target), (path, ref)
        assert pathlib.Path(target).stem in API_MODULES, (path, ref)
        assert key in _load(CONTRACT_DIR / target), (path, ref)


def test_every_component_is_a_reference_into_its_file_and_every_file_entry_is_registered() -> None:
    components = _load(ROOT_FILE)["components"]
    expected_files = {
        "schemas": r"schemas/[a-z_]+\.yaml",
        "parameters": r"parameters\.yaml",
        "responses": r"responses\.yaml",
        "headers": r"headers\.yaml",
    }
    registered: dict[pathlib.Path, set[str]] = {}
    for section, file_pattern in expected_files.items():
        for name, ref in components[section].items():
            assert _PASCAL_CASE.match(name), (section, name)
            assert list(ref) == ["$ref"], (section, name)
            target, _, key = ref["$ref"].partition("#/")
            assert re.fullmatch(file_pattern, target), (section, name, ref)
            assert key == name, (section, name, ref)
            assert name in _load(CONTRACT_DIR / target), (section, name, ref)
            registered.setdefault((CONTRACT_DIR / target).resolve(), set()).add(name)
    for component_file in [
        *sorted((CONTRACT_DIR / "schemas").glob("*.yaml")),
        *(CONTRACT_DIR / name for name in ("parameters.yaml", "responses.yaml", "headers.yaml")),
    ]:
        defined = set(_load(component_file.resolve()))
        assert defined == registered.get(component_file.resolve(), set()), component_file.name


def test_split_files_reference_components_only_through_the_root_document() -> None:
    for contract_file in _contract_files():
        if contract_file == ROOT_FILE:
            continue
        pattern = _ROOT_LEVEL_REF if contract_file.parent == CONTRACT_DIR else _SPLIT_REF
        for key, value in _walk(_load(contract_file)):
            if key == "$ref":
                assert pattern.match(value), f"{contract_file.name}: {value}"
            if key == "mapping":
                for target in value.values():
                    assert pattern.match(target), f"{contract_file.name}: discriminator {target}"


# ------------------------------------------------------------------------------------------ operations


@pytest.mark.parametrize(
    ("method", "path", "operation_id", "module"),
    REQUIRED_OPERATIONS,
    ids=[f"{entry[2]}" for entry in REQUIRED_OPERATIONS],
)
def test_required_operation_is_bound_to_its_handler_module(
    method: str, path: str, operation_id: str, module: str
) -> None:
    operation, item_file = _operation(path, method)
    assert operation["operationId"] == operation_id
    assert operation["x-openapi-router-controller"] == f"wepush.server.api.{module}"
    assert item_file.stem == module, "the path item lives in the file named after its handler module"
    assert len(operation["tags"]) == 1
    assert operation["summary"]
    assert operation["responses"]["default"] == {"$ref": "../openapi.yaml#/components/responses/Problem"}
    assert any(code.startswith("2") for code in operation["responses"]), "explicit success response"


def test_contract_has_no_operation_outside_the_required_table() -> None:
    declared = {(method, path) for path, method, _, _ in _operations()}
    required = {(method, path) for method, path, _, _ in REQUIRED_OPERATIONS}
    assert declared == required
    assert "/api/v1/openapi.json" not in _load(ROOT_FILE)["paths"], "the framework serves the spec itself"


def test_operation_ids_are_unique_camel_case_and_controllers_are_api_modules() -> None:
    operation_ids = [operation["operationId"] for _, _, operation, _ in _operations()]
    assert len(operation_ids) == len(set(operation_ids))
    declared_tags = {tag["name"] for tag in _load(ROOT_FILE)["tags"]}
    for _, _, operation, _ in _operations():
        assert _CAMEL_CASE.match(operation["operationId"]), operation["operationId"]
        controller = operation["x-openapi-router-controller"]
        prefix, _, module = controller.rpartition(".")
        assert prefix == "wepush.server.api"
        assert module in API_MODULES, controller
        assert operation["tags"][0] in declared_tags, operation["operationId"]


def test_public_and_agent_operations_declare_their_security() -> None:
    for path, _, operation, _ in _operations():
        security = operation.get("security")
        if path.startswith("/health/") or path in ("/api/v1/system/info", "/metrics"):
            assert security == [], path
        elif path == "/internal/agent/v1/enroll":
            assert security == [{"EnrollmentToken": []}]
        elif path.startswith("/internal/agent/v1/"):
            assert security == [{"AgentCredential": []}], path
        else:
            assert security in (None, [{"ApiToken": []}]), path
            assert "401" in operation["responses"], path


def test_workspace_resources_are_scoped_under_their_workspace() -> None:
    # The system audit events are the ones no workspace holds.
    global_prefixes = ("/api/v1/providers", "/api/v1/agents", "/api/v1/system/", "/api/v1/audit-events")
    for path, _, _, _ in _operations():
        if path.startswith("/api/v1/") and not path.startswith(global_prefixes):
            assert path == "/api/v1/workspaces" or path.startswith(_WS), path


# ------------------------------------------------------------------------------------------ envelopes


def test_every_error_response_is_a_problem_document() -> None:
    for _, _, operation, item_file in _operations():
        for status, raw in operation["responses"].items():
            if not (status == "default" or status[0] in "45"):
                continue
            if (operation["operationId"], status) in NON_PROBLEM_ERRORS:
                continue
            response, response_file = _deref(raw, item_file)
            content = response["content"]
            assert list(content) == [PROBLEM_MEDIA_TYPE], (operation["operationId"], status)
            schema_ref = content[PROBLEM_MEDIA_TYPE]["schema"]
            problem, _ = _deref(schema_ref, response_file)
            assert set(problem["required"]) >= {"type", "title", "status", "code"}


def test_problem_codes_cover_the_stable_error_codes() -> None:
    problem, problem_file = _deref({"$ref": "#/components/schemas/Problem"}, ROOT_FILE)
    code = _schema(problem["properties"]["code"], problem_file)
    assert set(code["enum"]) >= REQUIRED_PROBLEM_CODES
    assert {"type", "title", "status", "code", "detail", "instance", "traceId", "errors"} <= set(
        problem["properties"]
    )
    assert {"currentState", "allowedCommands", "allowedRange"} <= set(problem["properties"])
    field_error = _schema(problem["properties"]["errors"]["items"], problem_file)
    assert set(field_error["required"]) == {"field", "code", "message"}


def test_every_list_is_cursor_paginated_with_the_page_envelope() -> None:
    lists = [entry for entry in _operations() if entry[2]["operationId"].startswith("list")]
    assert len(lists) == 20
    for _, _, operation, item_file in _operations():
        json_ok = operation["responses"].get("200", {}).get("content", {}).get("application/json")
        if json_ok is not None and not operation["operationId"].startswith("list"):
            body = _schema(json_ok["schema"], item_file)
            assert "page" not in body.get("properties", {}), (
                f"{operation['operationId']} pages but is not a list"
            )
    for path, method, operation, item_file in lists:
        assert method == "get", operation["operationId"]
        params = _parameters(path, method)
        limit = params[("query", "limit")]["schema"]
        assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == (
            "integer",
            1,
            100,
            50,
        )
        assert not params[("query", "limit")].get("required", False)
        cursor = params[("query", "cursor")]
        assert cursor["schema"]["type"] == "string"
        assert not cursor.get("required", False)
        page_schema, page_file = _deref(
            operation["responses"]["200"]["content"]["application/json"]["schema"], item_file
        )
        assert set(page_schema["required"]) == {"items", "page"}, operation["operationId"]
        assert page_schema["properties"]["items"]["type"] == "array"
        page_info = _schema(page_schema["properties"]["page"], page_file)
        assert set(page_info["required"]) == {"nextCursor", "hasMore"}
        assert page_info["properties"]["nextCursor"]["nullable"] is True
        assert page_info["properties"]["hasMore"]["type"] == "boolean"


def test_creating_posts_accept_an_idempotency_key() -> None:
    for path, method, operation, _ in _operations():
        creates = method == "post" and ({"201", "202"} & set(operation["responses"]))
        if not creates:
            continue
        key = _parameters(path, method).get(("header", "Idempotency-Key"))
        operation_id = operation["operationId"]
        if operation_id in SECRET_ISSUING_OPERATIONS:
            assert key is None, f"{operation_id} must not replay a plaintext credential"
            continue
        assert key is not None, operation_id
        assert (key["schema"]["minLength"], key["schema"]["maxLength"]) == (1, 128)
        assert key.get("required", False) is (operation_id in IDEMPOTENCY_KEY_REQUIRED), operation_id


def test_run_commands_are_accepted_asynchronously() -> None:
    for command in ("pause", "resume", "cancel", "change-concurrency"):
        operation, item_file = _operation(_WS + f"/runs/{{runId}}/commands/{command}", "post")
        accepted = _schema(operation["responses"]["202"]["content"]["application/json"]["schema"], item_file)
        assert set(accepted["required"]) == {"commandId", "type", "state", "createdAt"}
        assert "409" in operation["responses"], "illegal transitions are RUN_STATE_CONFLICT"


def test_run_events_stream_as_server_sent_events_resumable_by_last_event_id() -> None:
    path = _WS + "/runs/{runId}/events"
    operation, _ = _operation(path, "get")
    assert set(operation["responses"]["200"]["content"]) == {"text/event-stream"}
    assert ("header", "Last-Event-ID") in _parameters(path, "get")
    assert "410" in operation["responses"], "a purged position is CURSOR_EXPIRED"


def test_artifact_download_supports_byte_ranges() -> None:
    path = _WS + "/runs/{runId}/artifacts/{artifactId}/content"
    operation, _ = _operation(path, "get")
    assert ("header", "Range") in _parameters(path, "get")
    assert {"200", "206", "416"} <= set(operation["responses"])
    assert "Content-Range" in operation["responses"]["206"]["headers"]
    assert "Content-Disposition" in operation["responses"]["200"]["headers"]
    assert {"application/octet-stream", "application/x-ndjson", "text/csv"} <= set(
        operation["responses"]["200"]["content"]
    )


def test_audience_import_content_accepts_csv_and_plain_text_uploads_as_files() -> None:
    operation, _ = _operation(_WS + "/audiences/{audienceId}/imports/{importId}/content", "put")
    content = operation["requestBody"]["content"]
    assert set(content) == {"text/csv", "text/plain", "application/vnd.ms-excel", "application/octet-stream"}
    for media in content.values():
        assert media["schema"] == {"type": "string", "format": "binary"}


# ------------------------------------------------------------------------------------------ request bodies


def test_json_request_bodies_reject_unknown_fields() -> None:
    for _, _, operation, item_file in _operations():
        body = operation.get("requestBody")
        if body is None or "application/json" not in body["content"]:
            continue
        schema = _schema(body["content"]["application/json"]["schema"], item_file)
        assert schema.get("additionalProperties") is False, operation["operationId"]


def test_optional_json_bodies_default_to_an_empty_object() -> None:
    # Connexion substitutes the schema default for a missing body and rejects a missing body without one.
    for _, _, operation, item_file in _operations():
        body = operation.get("requestBody")
        if body is None or body.get("required", False) or "application/json" not in body["content"]:
            continue
        schema = _schema(body["content"]["application/json"]["schema"], item_file)
        assert schema.get("default") == {}, operation["operationId"]


def test_updates_carry_the_optimistic_version() -> None:
    updates = [entry for entry in _operations() if entry[2]["operationId"].startswith("update")]
    assert len(updates) == 6
    for _, method, operation, item_file in updates:
        assert method == "put"
        schema = _schema(operation["requestBody"]["content"]["application/json"]["schema"], item_file)
        assert "version" in schema["required"], operation["operationId"]
        assert "409" in operation["responses"], "a stale version is VERSION_CONFLICT"


def test_secret_writes_are_write_only_and_reads_expose_status_only() -> None:
    secret_write, write_file = _deref({"$ref": "#/components/schemas/SecretWrite"}, ROOT_FILE)
    assert secret_write["discriminator"]["propertyName"] == "operation"
    variants = {}
    for raw in secret_write["oneOf"]:
        variant = _schema(raw, write_file)
        variants[variant["properties"]["operation"]["enum"][0]] = variant
    assert set(variants) == {"REPLACE", "KEEP"}
    value = variants["REPLACE"]["properties"]["value"]
    assert value["writeOnly"] is True
    assert value["maxLength"] == 65536
    assert "value" not in variants["KEEP"]["properties"]

    account, account_file = _deref({"$ref": "#/components/schemas/Account"}, ROOT_FILE)
    status = _schema(account["properties"]["secrets"]["additionalProperties"], account_file)
    assert set(status["properties"]) == {"configured", "updatedAt"}


# ------------------------------------------------------------------------------------------ examples


def test_secret_detector_flags_realistic_credentials_and_spares_placeholders() -> None:
    # Built at run time so the repository never contains a credential-shaped literal.
    fake_hex = "0123456789abcdef" * 3
    fake_base64 = "Qm9ndXM" + "xYWJj" * 4 + "Z9"
    assert _looks_like_secret(fake_hex)
    assert _looks_like_secret(f"Bearer {fake_base64}")
    assert not _looks_like_secret("<token>")
    assert not _looks_like_secret("0190f3a2-7c1e-7d3a-9b4e-2f1c0a9e8d71")
    assert not _looks_like_secret("https://wepush.example.com/errors/run-state-conflict")
    assert not _uses_placeholder_hosts_only("https://api.vendor-production.io/send")


def test_examples_contain_placeholders_only() -> None:
    checked = 0
    for contract_file in _contract_files():
        for key, value in _walk(_load(contract_file)):
            if key not in ("example", "examples", "default"):
                continue
            for text in _strings(value):
                checked += 1
                assert not _looks_like_secret(text), f"{contract_file.name}: {text!r}"
                assert _uses_placeholder_hosts_only(text), f"{contract_file.name}: {text!r}"
    assert checked > 100


def test_examples_are_valid_instances_of_their_schemas() -> None:
    # Generated docs, Swagger UI "try it" and schemathesis' explicit-example phase all replay these.
    checked = 0
    for contract_file in _contract_files():
        for example, schema in _examples_with_schemas(_load(contract_file)):
            resolved = _inline(schema, contract_file)
            errors = [
                error.message
                for error in OAS30Validator(resolved, format_checker=oas30_format_checker).iter_errors(
                    example
                )
            ]
            assert not errors, f"{contract_file.name}: example {example!r}: {errors}"
            checked += 1
    assert checked > 100
