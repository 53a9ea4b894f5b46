"""A real `wepush serve` process with a seeded database and an admin token, shared by the fuzz tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers_process import ServiceProcess, running_service


@dataclass
class FuzzTarget:
    service: ServiceProcess
    token: str
    workspace_id: str

    @property
    def base_url(self) -> str:
        return self.service.base_url

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="session")
def fuzz_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    data_dir: Path = tmp_path_factory.mktemp("fuzz") / "data"
    with running_service(data_dir) as service:
        token = (data_dir / "bootstrap-admin.token").read_text(encoding="utf-8").strip()
        info = httpx.get(
            f"{service.base_url}/api/v1/workspaces", headers={"Authorization": f"Bearer {token}"}
        )
        workspace_id = info.json()["items"][0]["id"] if info.status_code == 200 else "default"
        yield FuzzTarget(service, token, workspace_id)
