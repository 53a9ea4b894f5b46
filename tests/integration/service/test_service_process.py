from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.helpers_process import running_service


def test_standalone_service_answers_health_serves_contract_and_docs(tmp_path: Path) -> None:
    with running_service(tmp_path / "data") as service:
        live = httpx.get(service.base_url + "/health/live")
        assert live.status_code == 200
        spec = httpx.get(service.base_url + "/api/v1/openapi.json")
        assert spec.status_code == 200
        assert spec.json()["info"]["title"] == "WePush Next API"
        docs = httpx.get(service.base_url + "/api/v1/ui/")
        assert docs.status_code == 200
        assert "swagger" in docs.text.lower()
        ready = httpx.get(service.base_url + "/health/ready")
        assert ready.status_code == 200
        log = service.log()
        assert "effective configuration" in log
        # An operator's first start shows no library warnings (Starlette's about its test client was one).
        assert "Warning:" not in log


def test_the_real_server_takes_a_json_body_sent_chunked(tmp_path: Path) -> None:
    def pieces() -> Iterator[bytes]:
        yield b'{"name": "stre'
        yield b'amed"}'

    with running_service(tmp_path / "data") as service:
        token = (service.data_dir / "bootstrap-admin.token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with httpx.Client(base_url=service.base_url + "/api/v1", headers=headers, timeout=30) as client:
            workspace_id = client.get("/workspaces").json()["items"][0]["id"]
            created = client.post(f"/workspaces/{workspace_id}/audiences", content=pieces())

    assert created.status_code == 201, created.text
    assert created.json()["name"] == "streamed"
