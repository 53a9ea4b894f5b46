from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.helpers_process import running_service
from wepush.server.api.middleware import security_headers


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


def _raw_exchange(base_url: str, request: bytes) -> tuple[str, dict[str, str], bytes]:
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):  # the server closes the connection after a 400
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /api/v1/workspaces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: x\r\n\r\n",
        b"GET /api/v1/workspaces HTTP/1.1\r\nHost: x\r\nbroken header line\r\n\r\n",
        b"GET /api/v1/workspaces HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    ],
    ids=["unknown transfer coding", "header without colon", "negative length"],
)
def test_a_request_that_is_not_valid_http_gets_a_problem_not_plain_text(
    tmp_path: Path, request_head: bytes
) -> None:
    with running_service(tmp_path / "data") as service:
        status, headers, body = _raw_exchange(service.base_url, request_head)
        still_serving = httpx.get(service.base_url + "/health/live").status_code

    assert status == "HTTP/1.1 400 Bad Request"
    assert headers["content-type"] == "application/problem+json"
    assert int(headers["content-length"]) == len(body)
    # Every default header a response from the app carries (it used to have only the first and the last).
    assert {name: headers.get(name) for name, _ in security_headers("/api")} == dict(security_headers("/api"))
    problem = json.loads(body)
    assert (problem["status"], problem["code"]) == (400, "VALIDATION_FAILED")
    assert problem["traceId"] == headers["x-trace-id"]
    assert problem["detail"] == (
        "the request is not valid HTTP/1.1 (Invalid HTTP request received); nothing was processed"
    )
    assert still_serving == 200


def test_ctrl_c_stops_the_service_gracefully_without_a_traceback(tmp_path: Path) -> None:
    with running_service(tmp_path / "data") as service:
        service.process.send_signal(signal.SIGINT)
        code = service.process.wait(timeout=30)
        log = service.log()
    assert code == 130
    assert "Application shutdown complete" in log
    assert "wepush serve: interrupted" in log
    assert "Traceback" not in log
