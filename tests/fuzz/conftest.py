"""A real `wepush serve` process with a seeded database and an admin token, shared by the fuzz tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.fixtures.db import _create_postgres_database, _drop_postgres_database, _postgres_url
from tests.fuzz._seed import seed_workspace
from tests.helpers_process import ServiceProcess, running_service


@dataclass
class FuzzTarget:
    service: ServiceProcess
    token: str
    workspace_id: str
    resources: dict[str, str] = field(default_factory=dict)
    """Path parameter name → the id of a real resource in the workspace (see ``_seed``)."""

    @property
    def base_url(self) -> str:
        return self.service.base_url

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def fuzz_target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzTarget]:
    """The Service on each database: PostgreSQL refuses text SQLite stores (NUL, say), and its INTEGER
    is 32 bits, so inputs that pass on one can fail on the other."""
    with contextlib.ExitStack() as stack:
        env = _database_env(request, stack)
        yield stack.enter_context(_seeded_service(tmp_path_factory.mktemp("fuzz") / "data", env))


def _database_env(request: pytest.FixtureRequest, stack: contextlib.ExitStack) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    name = _create_postgres_database(template=request.getfixturevalue("postgres_template"))
    stack.callback(_drop_postgres_database, name)
    return {"WEPUSH_DATABASE_TYPE": "postgresql", "WEPUSH_DATABASE_URL": _postgres_url(name)}


@contextlib.contextmanager
def _seeded_service(data_dir: Path, database_env: dict[str, str]) -> Iterator[FuzzTarget]:
    # The seeded account sends to loopback only, which the Service allows when told it is under test.
    # The fuzzer sends thousands of requests a minute on one token: with the request budget on, a share
    # of them would be answered 429 and test nothing else (test_rate_limit_api covers the 429 itself).
    env = {
        "WEPUSH_SECURITY_LOOPBACK_TARGETS_FOR_TESTS": "true",
        "WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND": "0",
        **database_env,
    }
    with running_service(data_dir, extra_env=env) as service:
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=service.base_url, headers=headers, timeout=30) as client:
            info = client.get("/api/v1/workspaces", params={"name": "default"})
            assert info.status_code == 200, info.text
            workspace_id = str(info.json()["items"][0]["id"])
            resources = seed_workspace(client, workspace_id)
        yield FuzzTarget(service, token, workspace_id, resources)
