"""Server mode: two Service instances on one PostgreSQL database and one S3 bucket behave as one Service.
What one instance stores, the other serves; neither keeps artifacts of its own."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.fixtures.releases import NEWER_REVISION, migrate_with, newer_release
from tests.fixtures.s3 import S3Bucket
from tests.helpers_app import RunningApp
from tests.integration.api._support import default_workspace
from tests.integration.api._support_runs import (
    add_artifact,
    config_for,
    seed_world,
    service,
    start_confirmed,
    uow,
)
from wepush.server.composition._service import StartupRefused, preflight
from wepush.server.domain import Agent, AgentStatus, PageRequest
from wepush.server.infra.db import current_revision_async, head_revision, upgrade_database_async
from wepush.server.infra.secrets import MasterKeyRing

pytestmark = pytest.mark.postgres

CONTENT = b'{"itemId":"13800000001","state":"SUCCEEDED"}\n' * 1000


def _server_env(tmp_path: Path, postgres_url: str, s3_env: dict[str, str]) -> dict[str, str]:
    master_key = tmp_path / "secrets" / "master.key"
    MasterKeyRing.create_standalone(master_key)  # server mode only reads it: the operator provisions it
    return {
        **s3_env,
        "WEPUSH_MODE": "server",
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": postgres_url,
        "WEPUSH_SECRETS_MASTER_KEY_FILE": str(master_key),
    }


async def test_two_instances_share_the_database_and_the_bucket(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str], s3_bucket: S3Bucket
) -> None:
    env = _server_env(tmp_path, postgres_url, s3_env)
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


async def _embedded_agents(app: RunningApp, workspace_id: str) -> dict[str, Agent]:
    async with uow(app)(read_only=True) as work:
        page = await work.agents.list_page(workspace_id, PageRequest(limit=100))
    return {agent.display_name: agent for agent in page.items}


async def test_instances_on_one_host_keep_their_own_embedded_agent_across_restarts(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str]
) -> None:
    env = {**_server_env(tmp_path, postgres_url, s3_env), "WEPUSH_AGENT_EMBEDDED_ENABLED": "true"}
    host = socket.gethostname()
    async with service(tmp_path / "a", **env, WEPUSH_SERVER_PORT="18991") as first:
        workspace_id = await default_workspace(first)
        async with service(tmp_path / "b", **env, WEPUSH_SERVER_PORT="18992") as second:
            assert second.runtime.embedded_agent is not None
            second_id = second.runtime.embedded_agent.agent_id
        # The second instance stopped; the first, still sending, must not look stopped too.
        stopped = await _embedded_agents(first, workspace_id)
        async with service(tmp_path / "b", **env, WEPUSH_SERVER_PORT="18992") as restarted:
            assert restarted.runtime.embedded_agent is not None
            restarted_id = restarted.runtime.embedded_agent.agent_id
            running = await _embedded_agents(first, workspace_id)

    a, b = f"embedded@{host}:18991", f"embedded@{host}:18992"
    assert {name: agent.status for name, agent in stopped.items()} == {
        a: AgentStatus.ONLINE,
        b: AgentStatus.STOPPED,
    }
    # A restart finds its own row again (and with it the leases a dead predecessor held), never the other's.
    assert restarted_id == second_id == running[b].id
    assert {name: agent.status for name, agent in running.items()} == {
        a: AgentStatus.ONLINE,
        b: AgentStatus.ONLINE,
    }


@pytest.mark.parametrize(
    "migrated_to", [None, "0005_run_confirmation_once"], ids=["never-migrated", "an-older-release"]
)
async def test_an_instance_refuses_to_start_on_a_schema_wepush_migrate_has_not_brought_to_its_release(
    tmp_path: Path, empty_postgres_url: str, s3_env: dict[str, str], migrated_to: str | None
) -> None:
    # Server mode never migrates by itself. On a database `wepush migrate` had not run on, the start-up's
    # first query failed on a missing table, and the operator read an asyncpg traceback.
    if migrated_to is not None:
        await upgrade_database_async(empty_postgres_url, migrated_to)
    env = _server_env(tmp_path, empty_postgres_url, s3_env)
    config = config_for(tmp_path, **env)
    found = "has never been migrated" if migrated_to is None else f"is at revision {migrated_to}"
    says = (
        f"database: the schema {found}, and this release needs revision {head_revision()}; "
        "run 'wepush migrate' with this release first"
    )

    with pytest.raises(StartupRefused) as refused:
        await asyncio.to_thread(preflight, config)
    with pytest.raises(RuntimeError) as failed:
        async with service(tmp_path, **env):
            pass

    assert str(refused.value) == says
    # The lifespan tells the server the refusal's one line (not a missing table, nor a traceback).
    assert str(failed.value) == f"startup failed: {says}"
    assert await current_revision_async(empty_postgres_url) == migrated_to


async def test_instances_of_the_previous_release_start_and_serve_on_a_schema_declared_fit_for_them(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str], s3_bucket: S3Bucket
) -> None:
    # The ADR's rolling upgrade: one migration job of the new release, then the instances are replaced one
    # by one, so for a while the previous release runs (and restarts) on the expanded schema.
    await migrate_with(postgres_url, newer_release(tmp_path, compatible_from=head_revision()))
    env = _server_env(tmp_path, postgres_url, s3_env)
    config = config_for(tmp_path / "a", **env)

    await asyncio.to_thread(preflight, config)  # before, refused as a schema "this release does not know"
    async with service(tmp_path / "a", **env) as first:
        world = await seed_world(first)
        run_id = await start_confirmed(first, world)
        ready = await first.client.get("/health/ready")
        run = await first.client.get(world.runs_url(run_id), headers=first.admin())

    assert ready.status_code == 200
    assert ready.json()["checks"]["migrations"]["status"] == "UP"
    assert run.status_code == 200
    assert await current_revision_async(postgres_url) == NEWER_REVISION


async def test_an_instance_refuses_a_schema_a_newer_release_did_not_declare_fit_for_it(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str]
) -> None:
    # A contract migration: it runs once the previous release's instances are gone; one started by
    # mistake afterwards must not serve on a schema its queries may break on.
    await migrate_with(postgres_url, newer_release(tmp_path, compatible_from=None))
    config = config_for(tmp_path, **_server_env(tmp_path, postgres_url, s3_env))

    with pytest.raises(
        StartupRefused, match=f"database: the database schema is at revision {NEWER_REVISION}"
    ):
        await asyncio.to_thread(preflight, config)


async def test_an_instance_started_under_a_live_instances_name_refuses_before_failing_its_uploads(
    tmp_path: Path, postgres_url: str, s3_env: dict[str, str], s3_bucket: S3Bucket
) -> None:
    # A start fails the uploads an earlier process of its name was receiving (that process is gone), so
    # the name must be found free first: a live instance under it would lose the uploads it is receiving.
    env = {
        **_server_env(tmp_path, postgres_url, s3_env),
        "WEPUSH_AGENT_EMBEDDED_ENABLED": "true",
        "WEPUSH_SERVER_PORT": "18991",
    }
    async with service(tmp_path / "a", **env) as first:
        assert first.runtime.embedded_agent is not None
        ws = await default_workspace(first)
        base = f"/api/v1/workspaces/{ws}/audiences"
        audience = (await first.client.post(base, headers=first.admin(), json={"name": "customers"})).json()
        imports = f"{base}/{audience['id']}/imports"
        created = await first.client.post(
            imports,
            headers=first.admin(),
            json={"format": "CSV", "hasHeader": True, "itemIdField": "id", "fieldMapping": {"id": "id"}},
        )
        import_id = created.json()["id"]
        engine = first.runtime.engine
        assert engine is not None
        async with engine.begin() as connection:  # the first instance is receiving its file
            await connection.execute(
                text(
                    "UPDATE audience_import SET state = 'STAGING', "
                    "options_json = jsonb_set(options_json, '{receivedBy}', to_jsonb(CAST(:name AS text))) WHERE id = :id"
                ),
                {"name": first.runtime.config.embedded_agent_name, "id": import_id},
            )

        with pytest.raises(RuntimeError, match="in use by another live instance"):
            async with service(tmp_path / "b", **env):
                pass
        after = await first.client.get(f"{imports}/{import_id}", headers=first.admin())

    assert after.json()["state"] == "STAGING"


async def test_server_mode_on_local_artifacts_warns_that_instances_must_share_the_directory(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = _server_env(tmp_path, postgres_url, {})
    await upgrade_database_async(postgres_url)
    caplog.set_level(logging.WARNING, logger="wepush.server")
    async with service(tmp_path / "a", **env) as app:
        directory = app.runtime.config.artifacts.directory

    [warning] = [r for r in caplog.records if getattr(r, "event", None) == "ARTIFACTS_LOCAL_IN_SERVER_MODE"]
    assert str(directory) in warning.getMessage()
