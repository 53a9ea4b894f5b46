"""Run artifacts: listing, whole and ranged downloads, readiness, ownership, audit, no storage paths; with
the local store (standalone) and with an S3 bucket (server mode), behind the same API."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fixtures.s3 import S3Bucket
from tests.fixtures.store_gate import PIECE, store_gate
from tests.helpers_app import RunningApp
from tests.integration.api._support import issue_token
from tests.integration.api._support_runs import (
    World,
    add_artifact,
    seed_world,
    service,
    start_confirmed,
    uow,
)
from wepush.server.domain import Artifact, ArtifactState
from wepush.server.infra.artifacts import S3ArtifactStore
from wepush.server.infra.artifacts._s3 import READ_PATIENCE
from wepush.server.infra.logging import JsonFormatter


@pytest.fixture(params=["local", "s3"])
def store_env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "local":
        return {}
    env: dict[str, str] = request.getfixturevalue("s3_env")
    return env


CONTENT = b"".join(f'{{"itemId":"1380000000{i}","state":"FAILED"}}\n'.encode() for i in range(1, 5))


async def test_artifacts_are_listed_without_their_storage_location(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        failed = await add_artifact(app, world, run_id, CONTENT)
        log = await add_artifact(app, world, run_id, b"{}\n", artifact_type="RUN_LOG", file_name="logs.jsonl")
        listing = await app.client.get(world.runs_url(run_id, "artifacts"), headers=app.admin())
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    assert listing.status_code == 200
    items = listing.json()["items"]
    assert [(a["id"], a["type"], a["state"]) for a in items] == [
        (failed.id, "FAILED_ITEMS", "READY"),
        (log.id, "RUN_LOG", "READY"),
    ]
    assert items[0]["fileName"] == "failed.jsonl"
    assert items[0]["sizeBytes"] == len(CONTENT)
    assert items[0]["sha256"] == failed.sha256
    assert items[0]["contentHref"].endswith(f"/runs/{run_id}/artifacts/{failed.id}/content")
    assert failed.storage_key not in listing.text
    assert [link["id"] for link in detail["artifacts"]] == [failed.id, log.id]


async def test_a_whole_download_names_the_file_and_offers_ranges(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        response = await app.client.get(
            world.runs_url(run_id, "artifacts", artifact.id, "content"), headers=app.admin()
        )
        audit = (
            await app.client.get(
                f"/api/v1/workspaces/{world.workspace_id}/audit-events",
                headers=app.admin(),
                params={"action": "artifact.download"},
            )
        ).json()

    assert response.status_code == 200
    assert response.content == CONTENT
    assert response.headers["content-disposition"].startswith('attachment; filename="failed.jsonl"')
    assert response.headers["accept-ranges"] == "bytes"
    assert response.headers["content-length"] == str(len(CONTENT))
    assert artifact.storage_key not in str(response.headers)
    assert [e["resourceId"] for e in audit["items"]] == [artifact.id]


async def test_ranged_downloads_return_exactly_the_requested_bytes(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    size = len(CONTENT)
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        url = world.runs_url(run_id, "artifacts", artifact.id, "content")

        async def fetch(spec: str) -> tuple[int, bytes, str | None]:
            response = await app.client.get(url, headers={**app.admin(), "Range": spec})
            return response.status_code, response.content, response.headers.get("content-range")

        middle = await fetch("bytes=2-9")
        tail = await fetch("bytes=-5")
        open_ended = await fetch(f"bytes={size - 3}-")
        clipped = await fetch(f"bytes=0-{size * 2}")
        ignored = await fetch("items=0-1")

    assert middle == (206, CONTENT[2:10], f"bytes 2-9/{size}")
    assert tail == (206, CONTENT[-5:], f"bytes {size - 5}-{size - 1}/{size}")
    assert open_ended == (206, CONTENT[-3:], f"bytes {size - 3}-{size - 1}/{size}")
    assert clipped == (206, CONTENT, f"bytes 0-{size - 1}/{size}")
    assert ignored == (200, CONTENT, None)


async def test_an_unsatisfiable_range_is_416_with_the_full_size(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        response = await app.client.get(
            world.runs_url(run_id, "artifacts", artifact.id, "content"),
            headers={**app.admin(), "Range": f"bytes={len(CONTENT)}-"},
        )
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(CONTENT)}"
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_an_artifact_still_uploading_is_not_ready(tmp_path: Path, store_env: dict[str, str]) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, b"", ready=False)
        response = await app.client.get(
            world.runs_url(run_id, "artifacts", artifact.id, "content"), headers=app.admin()
        )
    assert response.status_code == 409
    assert response.json()["code"] == "ARTIFACT_NOT_READY"


async def test_an_artifact_is_only_downloadable_through_its_own_run(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        owner = await start_confirmed(app, world, key="a")
        other = await start_confirmed(app, world, key="b")
        artifact = await add_artifact(app, world, owner, CONTENT)
        response = await app.client.get(
            world.runs_url(other, "artifacts", artifact.id, "content"), headers=app.admin()
        )
    assert response.status_code == 404


async def test_a_viewer_may_download_and_an_outsider_may_not(
    tmp_path: Path, store_env: dict[str, str]
) -> None:
    async with service(tmp_path, **store_env) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        _, viewer = await issue_token(app, world.workspace_id, "VIEWER")
        other = await app.client.post("/api/v1/workspaces", headers=app.admin(), json={"name": "elsewhere"})
        _, outsider = await issue_token(app, other.json()["id"], "ADMIN")
        url = world.runs_url(run_id, "artifacts", artifact.id, "content")
        allowed = await app.client.get(url, headers=viewer)
        refused = await app.client.get(url, headers=outsider)

    assert allowed.status_code == 200
    assert allowed.content == CONTENT
    assert refused.status_code == 404


async def test_with_s3_the_bytes_live_in_the_bucket_not_on_the_instance(
    tmp_path: Path, s3_env: dict[str, str], s3_bucket: S3Bucket
) -> None:
    async with service(tmp_path, **s3_env) as app:
        assert isinstance(app.runtime.artifact_store, S3ArtifactStore)
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        artifact = await add_artifact(app, world, run_id, CONTENT)
        health = (await app.client.get("/health/ready")).json()
    assert health["checks"]["artifacts"] == {"status": "UP", "detail": "bucket reachable"}
    objects = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name)["Contents"]
    assert [(o["Key"], o["Size"]) for o in objects] == [(artifact.storage_key, len(CONTENT))]
    assert artifact.storage_key.startswith(f"runs/{run_id}/")
    assert not await asyncio.to_thread(lambda: [p for p in tmp_path.rglob("*.jsonl") if p.is_file()])
    # Another instance (here: the same Service restarted) serves the artifact from the bucket.
    async with service(tmp_path, **s3_env) as again:
        response = await again.client.get(
            world.runs_url(run_id, "artifacts", artifact.id, "content"), headers=again.admin()
        )
    assert (response.status_code, response.content) == (200, CONTENT)


async def test_a_service_whose_bucket_cannot_be_used_does_not_start(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    with pytest.raises(RuntimeError, match="the artifact bucket 'no-such-bucket' cannot be used") as failed:
        async with service(tmp_path, **{**s3_env, "WEPUSH_ARTIFACTS_S3_BUCKET": "no-such-bucket"}):
            pass
    assert s3_env["WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY"] not in str(failed.value)


async def test_the_configured_s3_secret_is_scrubbed_from_every_log_line(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    secret = s3_env["WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY"]
    async with service(tmp_path, **s3_env):
        record = logging.LogRecord("botocore", logging.DEBUG, __file__, 1, "signing with %s", (secret,), None)
        line = JsonFormatter(service="wepush-server", instance_id="test").format(record)
    assert secret not in line
    assert "signing with" in line


async def _given_up(
    app: RunningApp, world: World, run_id: str, artifact_type: str, file_name: str
) -> Artifact:
    """An upload given up: its row FAILED, no bytes."""
    begun = await add_artifact(
        app, world, run_id, b"", artifact_type=artifact_type, file_name=file_name, ready=False
    )
    async with uow(app)() as unit:
        return await unit.artifacts.update(replace(begun, state=ArtifactState.FAILED))


async def test_a_failed_artifact_another_one_replaced_is_not_listed(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        world = await seed_world(app)
        run_id = await start_confirmed(app, world)
        # As after a crash recovery: the dead executor's uploads FAILED, the files written again READY.
        await _given_up(app, world, run_id, "SUCCEEDED_ITEMS", "success.jsonl")
        lost_log = await _given_up(app, world, run_id, "RUN_LOG", "logs.jsonl")
        rebuilt = await add_artifact(
            app, world, run_id, CONTENT, artifact_type="SUCCEEDED_ITEMS", file_name="success.jsonl"
        )
        # A failed export written again since, whose replacement has expired and was deleted since.
        await _given_up(app, world, run_id, "RESULTS_EXPORT", "results.csv")
        expired = await add_artifact(
            app, world, run_id, b"a\n", artifact_type="RESULTS_EXPORT", file_name="results.csv"
        )
        async with uow(app)() as unit:
            await unit.artifacts.update(replace(expired, state=ArtifactState.DELETED))
        url = world.runs_url(run_id, "artifacts")
        first = (await app.client.get(url, headers=app.admin(), params={"limit": 1})).json()
        second = (
            await app.client.get(
                url, headers=app.admin(), params={"limit": 1, "cursor": first["page"]["nextCursor"]}
            )
        ).json()
        detail = (await app.client.get(world.runs_url(run_id), headers=app.admin())).json()

    listed = [(a["id"], a["type"], a["state"]) for a in first["items"] + second["items"]]
    # The log nothing replaced stays listed as lost; a client taking the first SUCCEEDED_ITEMS gets the file.
    assert listed == [(lost_log.id, "RUN_LOG", "FAILED"), (rebuilt.id, "SUCCEEDED_ITEMS", "READY")]
    assert first["page"]["hasMore"] is True
    assert second["page"]["hasMore"] is False
    assert [link["id"] for link in detail["artifacts"]] == [lost_log.id, rebuilt.id]


async def test_a_download_while_the_bucket_hangs_is_answered_503(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    async with store_gate(s3_env["WEPUSH_ARTIFACTS_S3_ENDPOINT_URL"]) as gate:
        env = {**s3_env, "WEPUSH_ARTIFACTS_S3_ENDPOINT_URL": gate.url}
        async with service(tmp_path, **env) as app:
            world = await seed_world(app)
            run_id = await start_confirmed(app, world)
            artifact = await add_artifact(app, world, run_id, CONTENT)
            # The bucket's host still accepts connections, and never answers them.
            await gate.hang()
            response = await app.client.get(
                world.runs_url(run_id, "artifacts", artifact.id, "content"), headers=app.admin()
            )

    assert response.status_code == 503
    assert response.json()["code"] == "SERVICE_NOT_READY"
    assert response.headers["retry-after"] == "10"
    assert gate.hung_connections >= 1


async def test_a_large_download_over_a_slow_but_steady_link_completes(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    pace = 0.25
    # Long enough that the whole transfer takes well over the read timeout, which bounds each wait alone.
    content = bytes(range(256)) * (math.ceil(1.5 * READ_PATIENCE.read_s / pace) * PIECE // 256)
    async with store_gate(s3_env["WEPUSH_ARTIFACTS_S3_ENDPOINT_URL"]) as gate:
        env = {**s3_env, "WEPUSH_ARTIFACTS_S3_ENDPOINT_URL": gate.url}
        async with service(tmp_path, **env) as app:
            world = await seed_world(app)
            run_id = await start_confirmed(app, world)
            artifact = await add_artifact(app, world, run_id, content, file_name="big.jsonl")
            gate.pace(pace)
            response = await app.client.get(
                world.runs_url(run_id, "artifacts", artifact.id, "content"), headers=app.admin()
            )

    assert response.status_code == 200
    assert response.content == content
