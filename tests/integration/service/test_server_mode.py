"""Server mode: two Service instances on one PostgreSQL database and one S3 bucket behave as one Service.
What one instance stores, the other serves; neither keeps artifacts of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fixtures.s3 import S3Bucket
from tests.integration.api._support_runs import add_artifact, seed_world, service, start_confirmed
from wepush.server.infra.secrets import MasterKeyRing

pytestmark = pytest.mark.postgres

CONTENT = b'{"itemId":"13800000001","state":"SUCCEEDED"}\n' * 1000


async def test_two_instances_share_the_database_and_the_bucket(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str], s3_bucket: S3Bucket
) -> None:
    master_key = tmp_path / "secrets" / "master.key"
    MasterKeyRing.create_standalone(master_key)  # server mode only reads it: the operator provisions it
    env = {
        **s3_env,
        "WEPUSH_MODE": "server",
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": postgres_url,
        "WEPUSH_SECRETS_MASTER_KEY_FILE": str(master_key),
    }
    async with service(tmp_path / "a", **env) as first, service(tmp_path / "b", **env) as second:
        world = await seed_world(first)
        run_id = await start_confirmed(first, world)
        artifact = await add_artifact(first, world, run_id, CONTENT)
        # The token the first instance issued is valid on the second: one database, one pepper.
        listing = await second.client.get(world.runs_url(run_id, "artifacts"), headers=first.admin())
        download = await second.client.get(
            world.runs_url(run_id, "artifacts", artifact.id, "content"),
            headers={**first.admin(), "Range": "bytes=46-91"},
        )
        ready = (await second.client.get("/health/ready")).json()

    assert [item["id"] for item in listing.json()["items"]] == [artifact.id]
    assert (download.status_code, download.content) == (206, CONTENT[46:92])
    assert ready["checks"]["artifacts"] == {"status": "UP", "detail": "bucket reachable"}
    objects = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name)["Contents"]
    assert [o["Key"] for o in objects] == [artifact.storage_key]
    assert not await asyncio.to_thread(lambda: [p for p in tmp_path.rglob("*.jsonl") if p.is_file()])
