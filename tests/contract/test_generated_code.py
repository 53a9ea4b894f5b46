"""The generated code is importable, marked as generated, and CI notices a contract changed without it."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "generated"
_UNMARKABLE = {"FILES", "VERSION", ".openapi-generator-ignore", "py.typed"}


def _generated_files() -> list[Path]:
    return sorted(p for p in GENERATED.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_every_generated_file_says_it_is_generated() -> None:
    unmarked = []
    for path in _generated_files():
        if path.name in _UNMARKABLE:
            continue
        head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:15]).lower()
        if path.suffix == ".json":
            text = path.read_text(encoding="utf-8")
            ok = "generated" in head or any(m in text for m in ('"x-generated"', '"$comment"', '"//"'))
        else:
            ok = "generated" in head or "do not edit" in head
        if not ok:
            unmarked.append(str(path.relative_to(ROOT)))
    assert unmarked == []


@pytest.mark.parametrize(
    "module",
    [
        "wepush.generated.api.models",
        "wepush.generated.schemas.execution_spec_schema",
        "wepush.generated.schemas.config_schema",
        "wepush.generated.agent_proto.v1.agent_pb2",
        "wepush.generated.agent_proto.v1.agent_pb2_grpc",
        "wepush_client",
        "wepush_client.api.runs_api",
    ],
)
def test_generated_module_imports(module: str) -> None:
    assert importlib.import_module(module) is not None


def test_grpc_stubs_expose_the_connect_stream() -> None:
    grpc_module = importlib.import_module("wepush.generated.agent_proto.v1.agent_pb2_grpc")
    pb2 = importlib.import_module("wepush.generated.agent_proto.v1.agent_pb2")
    assert hasattr(grpc_module, "AgentControlServiceStub")
    assert hasattr(grpc_module, "AgentControlServiceServicer")
    envelope = pb2.AgentToService(agent_id="agent-1", sequence=1)
    assert pb2.AgentToService.FromString(envelope.SerializeToString()).agent_id == "agent-1"


def test_generated_python_client_builds_requests_for_the_contract() -> None:
    client = importlib.import_module("wepush_client")
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:1"))
    runs = client.RunsApi(api)
    assert callable(runs.start_run)
    assert callable(runs.list_runs)


def test_pydantic_models_validate_the_contract_shapes() -> None:
    models = importlib.import_module("wepush.generated.api.models")
    page = models.PageInfo.model_validate({"nextCursor": None, "hasMore": False})
    assert page.hasMore is False


def test_check_generated_fails_when_a_contract_changes_without_regeneration(tmp_path: Path) -> None:
    contracts = tmp_path / "contracts"
    shutil.copytree(ROOT / "contracts", contracts)
    schema = contracts / "jsonschema" / "run-summary.schema.json"
    schema.write_text(
        schema.read_text(encoding="utf-8").replace('"title": "RunSummary"', '"title": "RunSummaryChanged"'),
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_generated.py"), "--contracts", str(contracts)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 1
    assert "run_summary_schema.py" in result.stderr
