from __future__ import annotations

import json
import logging
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.fixtures.releases import NEWER_REVISION, migrate_with, newer_release
from tests.helpers_app import running_app, standalone_config
from wepush.server.infra.db import current_revision_async, head_revision, upgrade_database_async
from wepush.server.infra.secrets import MasterKeyRing


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_first_start_writes_a_private_bootstrap_token_and_master_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = standalone_config(tmp_path)
    caplog.set_level(logging.DEBUG)
    async with running_app(config) as app:
        token = app.admin_token
        assert token is not None
        assert token.startswith("wpn_")
        assert _mode(config.security.bootstrap_token_file) == 0o600
        assert _mode(config.secrets.master_key_file) == 0o600
        # Recipients' personal data: the database and its WAL files are the Service user's alone.
        database = config.data_dir / "wepush-next.db"
        assert {path.name: _mode(path) for path in config.data_dir.glob("wepush-next.db*")} == {
            name: 0o600
            for name in ("wepush-next.db", "wepush-next.db-wal", "wepush-next.db-shm", "wepush-next.db.lock")
        }
        assert database.exists()
        assert _mode(config.data_dir) == 0o700
        assert str(config.security.bootstrap_token_file) in caplog.text
        assert token not in caplog.text
    async with running_app(config) as again:
        # A restart keeps the first token valid and issues no new one.
        assert again.runtime.bootstrap_token_written is False
        response = await again.client.get(
            "/api/v1/schedules-does-not-exist", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 404


async def test_the_bootstrap_token_is_never_written_through_a_symbolic_link(tmp_path: Path) -> None:
    config = standalone_config(tmp_path)
    elsewhere = tmp_path / "attacker-readable.txt"
    config.security.bootstrap_token_file.parent.mkdir(parents=True)
    config.security.bootstrap_token_file.symlink_to(elsewhere)

    with pytest.raises(RuntimeError, match="cannot write the bootstrap token file"):
        async with running_app(config):
            pass

    assert not elsewhere.exists()
    # Nothing was issued that nobody holds: once the link is gone, the next start issues the token.
    config.security.bootstrap_token_file.unlink()
    async with running_app(config) as app:
        assert app.admin_token is not None
        listed = await app.client.get("/api/v1/workspaces", headers=app.admin())
        assert listed.status_code == 200
        assert _mode(config.security.bootstrap_token_file) == 0o600


async def test_the_bootstrap_token_creation_is_audited_as_the_system(tmp_path: Path) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        listed = await app.client.get("/api/v1/workspaces", headers=app.admin(), params={"name": "default"})
        ws = listed.json()["items"][0]["id"]
        tokens = (await app.client.get(f"/api/v1/workspaces/{ws}/api-tokens", headers=app.admin())).json()
        [bootstrap] = [t["id"] for t in tokens["items"] if t["name"] == "bootstrap-admin"]
        audit_url = f"/api/v1/workspaces/{ws}/audit-events"
        params = {"action": "token.create"}
        events = (await app.client.get(audit_url, headers=app.admin(), params=params)).json()["items"]
        assert [(e["actor"]["type"], e["resourceType"], e["resourceId"], e["outcome"]) for e in events] == [
            ("SYSTEM", "API_TOKEN", bootstrap, "SUCCESS")
        ]
        assert events[0]["details"]["fieldNames"] == ["name", "role"]
        assert "SYSTEM_ADMIN" in events[0]["details"]["summary"]
        assert app.admin_token is not None
        assert app.admin_token not in str(events)
    async with running_app(config) as again:
        # A restart issues no token, so it records no creation either.
        events = (await again.client.get(audit_url, headers=again.admin(), params=params)).json()["items"]
        assert [e["resourceId"] for e in events] == [bootstrap]


async def test_protected_operations_require_a_valid_token(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        anonymous = await app.client.get("/api/v1/providers")
        assert anonymous.status_code == 401
        assert anonymous.headers["content-type"].startswith("application/problem+json")
        assert anonymous.json()["code"] == "AUTHENTICATION_REQUIRED"
        forged = await app.client.get("/api/v1/providers", headers={"Authorization": "Bearer wpn_forged"})
        assert forged.status_code == 401
        # There is no bypass for loopback callers: the in-process client is as local as it gets.
        assert (await app.client.get("/api/v1/system/info")).status_code == 200


async def test_readiness_checks_database_migrations_secrets_and_artifacts(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        ready = await app.client.get("/health/ready")
        assert ready.status_code == 200
        checks = ready.json()["checks"]
        assert {"database", "migrations", "secrets", "artifacts"} <= set(checks)
        assert all(check["status"] == "UP" for check in checks.values())


async def test_readiness_is_down_while_secrets_use_a_key_version_the_key_file_lacks(tmp_path: Path) -> None:
    # What an instance sees when another host rotated the master key and its own file was not copied.
    async with running_app(standalone_config(tmp_path)) as app:
        engine = app.runtime.engine
        assert engine is not None
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE secret_record SET key_version = 9"))
        missing = await app.client.get("/health/ready")
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE secret_record SET key_version = 1"))
        restored = await app.client.get("/health/ready")

    assert missing.status_code == 503
    secrets = missing.json()["checks"]["secrets"]
    assert secrets["status"] == "DOWN"
    assert "master key version 9" in secrets["detail"]
    assert "copy the key file" in secrets["detail"]
    assert restored.status_code == 200
    assert restored.json()["checks"]["secrets"]["status"] == "UP"


async def test_readiness_is_down_once_the_key_file_no_longer_holds_a_version_in_use(tmp_path: Path) -> None:
    """Another data directory sharing the key file rotated and retired version 1: this instance still
    opens its secrets from memory, but would not start again; readiness says so while it can be fixed."""
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        key_file = config.secrets.master_key_file
        saved = key_file.read_text(encoding="utf-8")
        ring = json.loads(saved)
        ring["keys"] = {"2": next(iter(ring["keys"].values()))}
        ring["active"] = 2
        key_file.write_text(json.dumps(ring), encoding="utf-8")
        retired = await app.client.get("/health/ready")
        key_file.write_text(saved, encoding="utf-8")
        restored = await app.client.get("/health/ready")

    assert retired.status_code == 503
    secrets = retired.json()["checks"]["secrets"]
    assert secrets["status"] == "DOWN"
    assert "no longer holds master key version 1" in secrets["detail"]
    assert restored.json()["checks"]["secrets"]["status"] == "UP"


async def test_readiness_is_down_while_the_disk_it_writes_to_is_nearly_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk refused every write (503 since) while readiness stayed UP; now it says so first."""
    async with running_app(standalone_config(tmp_path)) as app:
        roomy = await app.client.get("/health/ready")
        real = shutil.disk_usage

        def nearly_full(path: str | Path) -> Any:
            return real(path)._replace(free=5 * 1024 * 1024)

        monkeypatch.setattr(shutil, "disk_usage", nearly_full)
        full = await app.client.get("/health/ready")

    assert roomy.status_code == 200
    assert full.status_code == 503
    checks = full.json()["checks"]
    assert (checks["database"]["status"], checks["artifacts"]["status"]) == ("DOWN", "DOWN")
    assert "only 5 MiB free" in checks["database"]["detail"]


async def test_readiness_is_down_while_its_key_ring_holds_another_key_under_a_version_in_use(
    tmp_path: Path,
) -> None:
    # What an instance sees when another host activated a version under the same number with another key
    # (a key file copied before a retire, say): the number matches, the key does not.
    async with running_app(standalone_config(tmp_path)) as app:
        runtime = app.runtime
        assert runtime.engine is not None
        assert runtime.secret_store is not None
        ours, theirs = runtime.secret_store.key_ring, MasterKeyRing.generate()
        async with runtime.engine.begin() as connection:
            rows = (
                await connection.execute(text("SELECT id, dek_nonce, encrypted_dek FROM secret_record"))
            ).all()
            for row in rows:
                dek = ours.unwrap_dek(1, row.dek_nonce, row.encrypted_dek)
                _, nonce, wrapped = theirs.wrap_dek(dek)
                await connection.execute(
                    text("UPDATE secret_record SET dek_nonce = :n, encrypted_dek = :e WHERE id = :id"),
                    {"n": nonce, "e": wrapped, "id": row.id},
                )
        wrong = await app.client.get("/health/ready")

    assert rows
    assert wrong.status_code == 503
    secrets = wrong.json()["checks"]["secrets"]
    assert secrets["status"] == "DOWN"
    assert "a different key under master key version 1" in secrets["detail"]


async def test_readiness_reports_a_schema_another_release_moved(tmp_path: Path) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        # What the Service sees after a `wepush migrate` of another release ran under it.
        async with app.runtime.engine.begin() as connection:  # type: ignore[union-attr]
            await connection.execute(
                text("UPDATE alembic_version SET version_num = '0004_live_names_unique'")
            )

        ready = await app.client.get("/health/ready")

    assert ready.status_code == 503
    assert ready.json()["checks"]["migrations"] == {
        "status": "DOWN",
        "detail": "at revision 0004_live_names_unique, behind this release; run 'wepush migrate'",
    }


@pytest.mark.parametrize("declares_fit", [True, False], ids=["expand", "contract"])
async def test_an_instance_stays_ready_while_a_newer_release_it_is_fit_for_rolls_out(
    tmp_path: Path, declares_fit: bool
) -> None:
    # A rolling upgrade: the newer release's migration job runs while this release's instances serve.
    # Before, every instance of the previous release turned unready at once (the load balancer then had
    # none to send traffic to) even when the new schema only added a column they never read.
    config = standalone_config(tmp_path)
    newer = newer_release(tmp_path, compatible_from=head_revision() if declares_fit else None)
    async with running_app(config) as app:
        await migrate_with(config.database.url, newer)

        ready = await app.client.get("/health/ready")
        listed = await app.client.get(
            "/api/v1/workspaces", headers={"Authorization": f"Bearer {app.admin_token}"}
        )

    assert listed.status_code == 200  # the older code still reads and writes the expanded tables
    if declares_fit:
        assert ready.status_code == 200
        assert ready.json()["checks"]["migrations"] == {
            "status": "UP",
            "detail": f"at revision {NEWER_REVISION} of a newer release, which runs releases from revision "
            f"{head_revision()} on",
        }
    else:
        assert ready.status_code == 503
        assert ready.json()["checks"]["migrations"] == {
            "status": "DOWN",
            "detail": f"at revision {NEWER_REVISION} of a newer release, which this release cannot run on",
        }


async def test_a_standalone_restart_on_a_schema_a_newer_release_declared_fit_serves_without_migrating(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config):
        pass
    await migrate_with(config.database.url, newer_release(tmp_path, compatible_from=head_revision()))

    caplog.set_level(logging.WARNING, logger="wepush.server")
    async with running_app(config) as again:
        ready = await again.client.get("/health/ready")

    assert ready.status_code == 200
    assert f"database schema at revision {NEWER_REVISION} of a newer release" in caplog.text
    assert await current_revision_async(config.database.url) == NEWER_REVISION


async def test_responses_carry_security_headers_and_the_trace_id(tmp_path: Path) -> None:
    async with running_app(standalone_config(tmp_path)) as app:
        response = await app.client.get("/health/live", headers={"X-Trace-Id": "trace-abc-123"})
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-trace-id"] == "trace-abc-123"


async def test_oversized_bodies_are_refused_with_a_problem(tmp_path: Path) -> None:
    config = standalone_config(tmp_path, WEPUSH_SERVER_MAX_BODY_BYTES="1024")
    async with running_app(config) as app:
        response = await app.client.post(
            "/api/v1/workspaces", headers=app.admin(), content=b"{" + b" " * 4096 + b"}"
        )
        assert response.status_code == 413
        assert response.json()["code"] == "PAYLOAD_TOO_LARGE"


async def test_server_mode_without_a_master_key_fails_closed(tmp_path: Path) -> None:
    config = standalone_config(
        tmp_path,
        WEPUSH_MODE="server",
        WEPUSH_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'server.db'}",
    )
    # Migrated, as `wepush migrate` leaves it: the start must fail on the key, not on the schema.
    await upgrade_database_async(config.database.url)
    with pytest.raises(RuntimeError, match="startup failed") as failed:
        async with running_app(config):
            pass
    assert f"master key file {config.secrets.master_key_file} does not exist" in str(failed.value)
    assert not config.secrets.master_key_file.exists()


async def test_a_data_directory_open_to_other_users_is_reported_with_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = standalone_config(tmp_path)
    config.data_dir.mkdir(parents=True)
    config.data_dir.chmod(0o755)
    caplog.set_level(logging.WARNING)
    async with running_app(config):
        pass
    assert f"data directory {config.data_dir} is open to other users (mode 755)" in caplog.text
    assert f"chmod 700 {config.data_dir}" in caplog.text
    assert _mode(config.data_dir / "wepush-next.db") == 0o600


async def test_artifact_retention_runs_even_without_an_embedded_agent(tmp_path: Path) -> None:
    config = standalone_config(tmp_path, WEPUSH_AGENT_EMBEDDED_ENABLED="false")
    async with running_app(config) as app:
        assert app.runtime.embedded_agent is None
        sweep = app.runtime.artifact_retention
        assert sweep is not None
        assert sweep.get_name() == "artifact-retention"
        assert not sweep.done()
    assert sweep.cancelled()
    assert app.runtime.artifact_retention is None
