"""The database goes away under a running Service (PostgreSQL behind a loopback gate the test closes):
requests get 503 SERVICE_NOT_READY with Retry-After, as any transient outage, not a 500 that reads as a
bug; readiness says what is wrong; and everything works again once the database is back."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import make_url

from tests.fixtures.tcp_gate import tcp_gate
from tests.integration.api._support import accounts_url, default_workspace, http_account, service

pytestmark = pytest.mark.postgres


async def test_requests_during_a_database_outage_are_503_and_the_service_recovers(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    real = make_url(postgres_url)
    assert real.host is not None
    async with tcp_gate(real.host, real.port or 5432) as gate:
        gated = real.set(host="127.0.0.1", port=gate.port).render_as_string(hide_password=False)
        async with service(tmp_path, WEPUSH_DATABASE_TYPE="postgresql", WEPUSH_DATABASE_URL=gated) as app:
            ws = await default_workspace(app)
            before = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("before"))

            await gate.close()  # the database host goes down: open connections cut, new ones refused
            caplog.set_level(logging.WARNING)
            during = [
                await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("during")),
                await app.client.get(accounts_url(ws), headers=app.admin()),
            ]
            ready = await app.client.get("/health/ready")

            await gate.open()  # back, on the same port
            after = await app.client.post(accounts_url(ws), headers=app.admin(), json=http_account("after"))
            listed = await app.client.get(accounts_url(ws), headers=app.admin())

    assert before.status_code == 201
    for response in during:
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "SERVICE_NOT_READY"
        assert int(response.headers["Retry-After"]) > 0
    assert "Traceback" not in caplog.text
    assert ready.status_code == 503
    database = ready.json()["checks"]["database"]
    assert database["status"] == "DOWN"
    assert "ConnectionRefusedError" in database["detail"]
    assert after.status_code == 201, after.text
    assert sorted(a["name"] for a in listed.json()["items"]) == ["after", "before"]
