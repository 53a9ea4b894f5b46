"""One standalone Service per SQLite database: a second one is refused at once, and a restart after a crash
does not wait a lease TTL for the crashed process's heartbeat to age (it cannot be alive: it held the lock)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.helpers_app import running_app, standalone_config
from tests.helpers_process import free_port, running_service, serve_to_exit
from wepush.server.composition._service import ServiceRuntime, StartupRefused, build_service_app
from wepush.server.infra.artifacts import ArtifactStoreUnavailable
from wepush.server.infra.db import DatabaseInUse, DatabaseLock, sqlite_database_file


def _database(tmp_path: Path) -> Path:
    database = sqlite_database_file(standalone_config(tmp_path).database.url)
    assert database is not None
    return database


def test_the_lock_names_its_holder_and_is_free_again_once_released(tmp_path: Path) -> None:
    database = tmp_path / "wepush.db"
    held = DatabaseLock.acquire(database)
    with pytest.raises(DatabaseInUse) as refused:
        DatabaseLock.acquire(database)
    assert refused.value.holder_pid == os.getpid()
    assert f"process {os.getpid()}" in str(refused.value)
    held.release()
    DatabaseLock.acquire(database).release()


def test_postgresql_and_in_memory_databases_take_no_lock() -> None:
    assert sqlite_database_file("postgresql+asyncpg://wepush@127.0.0.1:5432/wepush") is None
    assert sqlite_database_file("sqlite+aiosqlite:///:memory:") is None
    assert sqlite_database_file("sqlite+aiosqlite:////srv/wepush/wepush.db") == Path("/srv/wepush/wepush.db")


async def test_a_second_service_on_the_same_database_is_refused_and_the_first_keeps_serving(
    tmp_path: Path,
) -> None:
    config = standalone_config(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="false")
    async with running_app(config) as first:
        _, second = build_service_app(standalone_config(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="false"))
        with pytest.raises(StartupRefused, match=r"another WePush Service .* is running on the database"):
            await second.start()
        assert second.database_lock is None
        response = await first.client.get("/api/v1/workspaces", headers=first.admin())
        assert response.status_code == 200
    # Stopped: the lock is given up with it.
    DatabaseLock.acquire(_database(tmp_path)).release()


async def test_a_refused_start_gives_the_lock_up(tmp_path: Path) -> None:
    # A start refused after the lock was taken (here: an S3 bucket it cannot reach) must not keep holding
    # it, or the next attempt in the same process would be refused for a Service that never ran.
    config = standalone_config(
        tmp_path,
        WEPUSH_ARTIFACTS_TYPE="s3",
        WEPUSH_ARTIFACTS_S3_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}",
        WEPUSH_ARTIFACTS_S3_BUCKET="missing",
    )
    runtime: ServiceRuntime = build_service_app(config)[1]
    with pytest.raises(ArtifactStoreUnavailable):
        await runtime.start()
    DatabaseLock.acquire(_database(tmp_path)).release()


def test_wepush_serve_refuses_a_second_instance_and_restarts_at_once_after_a_crash(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_service(data_dir) as first:
        second = serve_to_exit(data_dir, timeout_s=60)
        assert second.returncode == 3, second.stderr
        assert (
            f"another WePush Service (process {first.process.pid}) is running on the database"
            in second.stderr
        )
        # The crash: no clean stop, so the embedded agent's last heartbeat is fresh and says RUNNING.
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
    with running_service(data_dir) as restarted:
        log = restarted.log()
    # Without the lock it first watched that heartbeat age for a lease TTL (30 s) to tell a crashed
    # predecessor from a live one; holding the lock proves there is no live one.
    assert "AGENT_NAME_WAIT" not in log
    assert "waiting up to" not in log
