"""A run artifact downloaded while the S3 endpoint is down: 503 SERVICE_NOT_READY with Retry-After, one
WARNING line without a traceback, and the artifact downloads again once the endpoint is back.

Before, botocore's EndpointConnectionError reached the generic handler: 500 INTERNAL_ERROR and a
botocore/urllib3 traceback in the log, for a store that had lost nothing and that ``/health/ready``
already reported DOWN.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from tests.fixtures.s3 import ACCESS_KEY, REGION, SECRET_KEY, s3_client
from tests.helpers_process import free_port
from tests.integration.api._support_runs import add_artifact, seed_world, service, start_confirmed

CONTENT = b"".join(f'{{"itemId":"1380000000{i}","state":"FAILED"}}\n'.encode() for i in range(1, 5))
BUCKET = "wepush-outage"


class _Endpoint:
    """A moto S3 server of this test's own (the session's one must stay up for the other tests)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.running = False

    def start(self) -> None:
        self._server.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._server.stop()
            self.running = False


@pytest.fixture
def endpoint() -> Iterator[_Endpoint]:
    server = _Endpoint()
    server.start()
    s3_client(server.url).create_bucket(Bucket=BUCKET)
    try:
        yield server
    finally:
        server.stop()


def _env(endpoint: _Endpoint) -> dict[str, str]:
    return {
        "WEPUSH_ARTIFACTS_TYPE": "s3",
        "WEPUSH_ARTIFACTS_S3_ENDPOINT_URL": endpoint.url,
        "WEPUSH_ARTIFACTS_S3_BUCKET": BUCKET,
        "WEPUSH_ARTIFACTS_S3_REGION": REGION,
        "WEPUSH_ARTIFACTS_S3_ACCESS_KEY_ID": ACCESS_KEY,
        "WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY": SECRET_KEY,
    }


async def test_a_download_while_the_bucket_is_unreachable_is_503_without_a_traceback(
    tmp_path: Path, endpoint: _Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with service(tmp_path, **_env(endpoint)) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        url = world.runs_url(run_id, "artifacts", artifact.id, "content")
        endpoint.stop()
        caplog.clear()
        whole = await app.client.get(url, headers=app.admin())
        ranged = await app.client.get(url, headers={**app.admin(), "Range": "bytes=2-9"})
        ready = await app.client.get("/health/ready")
        logged = list(caplog.records)

        endpoint.start()  # moto keeps its buckets in memory, so the object is back with it
        again = await app.client.get(url, headers=app.admin())

    for refused in (whole, ranged):
        assert refused.status_code == 503
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.headers["retry-after"] == "10"
        problem = refused.json()
        assert problem["code"] == "SERVICE_NOT_READY"
        assert "artifact store" in problem["detail"]
        assert endpoint.url not in refused.text
        assert artifact.storage_key not in refused.text
    assert ready.json()["checks"]["artifacts"]["status"] == "DOWN"

    assert not [r for r in logged if r.exc_info or r.levelno >= logging.ERROR]
    warnings = [r for r in logged if getattr(r, "event", None) == "ARTIFACT_STORE_UNREACHABLE"]
    assert len(warnings) == 2
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "EndpointConnectionError" in warnings[0].getMessage()
    assert artifact.storage_key not in warnings[0].getMessage()
    assert not [r for r in logged if getattr(r, "event", None) == "REQUEST_FAILED"]

    assert (again.status_code, again.content) == (200, CONTENT)
