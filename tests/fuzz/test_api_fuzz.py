"""Schemathesis fuzzes every implemented operation of the running Service against its contract.

Properties: no 5xx, every response conforms to the contract (status, content type, headers, body), and a
client without credentials is refused on every protected operation.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.specs.openapi import checks as openapi_checks

from tests.fuzz.conftest import FuzzTarget
from wepush.server.composition import load_openapi
from wepush.server.composition._resolver import unimplemented_operations

SPEC = load_openapi()
UNIMPLEMENTED = set(unimplemented_operations(SPEC))
#: Endpoints that stream forever are exercised by the run tests, not by the fuzzer.
STREAMING = {"streamRunEvents"}
#: The agent JSON API needs an agent credential issued by enrollment; it is fuzzed with the agent work.
INTERNAL_PREFIX = "/internal/"

# The import upload also takes what browsers on Windows call a .csv file; it is bytes like any file.
schemathesis.serializer.alias("application/vnd.ms-excel", "application/octet-stream")
schema = schemathesis.openapi.from_dict(SPEC)
_CASES = itertools.count()
#: Cases per operation. `make test` runs 25; `make fuzz` runs 200, which finds what a rarer input breaks
#: (the Service refuses unknown WEPUSH_* variables, so this one has a name of its own).
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "25"))

CHECKS: list[Any] = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
]


def _fuzzed(ctx: Any) -> bool:
    operation = ctx.operation
    operation_id = operation.definition.raw.get("operationId")
    return (
        operation_id not in UNIMPLEMENTED
        and operation_id not in STREAMING
        and not operation.path.startswith(INTERNAL_PREFIX)
    )


@schema.include(_fuzzed).parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_implemented_operations_conform_to_the_contract(case: Case[Any], fuzz_target: FuzzTarget) -> None:
    if case.path_parameters:
        _aim_at_real_resources(case.path_parameters, fuzz_target)
    case.call_and_validate(base_url=fuzz_target.base_url, headers=fuzz_target.auth(), checks=CHECKS)


def _aim_at_real_resources(parameters: dict[str, Any], target: FuzzTarget) -> None:
    """Point most cases at the real workspace and the seeded resources, so the handlers behind the
    lookups are fuzzed, not only the 404 path; one case in four keeps the generated ids for that path."""
    if "workspaceId" in parameters:
        parameters["workspaceId"] = target.workspace_id
    if next(_CASES) % 4 == 3:
        return
    for name in parameters.keys() & target.resources.keys():
        parameters[name] = target.resources[name]


def _protected_operations() -> list[tuple[str, str, str]]:
    rows = []
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "delete", "patch"}:
                continue
            security = operation.get("security", SPEC.get("security"))
            if security == [] or path.startswith(INTERNAL_PREFIX):
                continue
            rows.append((method.upper(), path, operation["operationId"]))
    return sorted(rows)


@pytest.mark.parametrize(("method", "path", "operation_id"), _protected_operations())
def test_unauthenticated_clients_are_refused(
    method: str, path: str, operation_id: str, fuzz_target: FuzzTarget
) -> None:
    concrete = path.replace("{workspaceId}", fuzz_target.workspace_id)
    for name in (
        "accountId",
        "messageId",
        "audienceId",
        "importId",
        "snapshotId",
        "jobId",
        "runId",
        "commandId",
        "artifactId",
        "scheduleId",
        "agentId",
        "tokenId",
        "providerId",
        "revision",
        "principalId",
        "memberId",
    ):
        concrete = concrete.replace("{" + name + "}", "1")
    response = httpx.request(method, fuzz_target.base_url + concrete, timeout=10)
    assert response.status_code == 401, operation_id
    assert response.json()["code"] == "AUTHENTICATION_REQUIRED"
