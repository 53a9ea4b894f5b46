from __future__ import annotations

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
