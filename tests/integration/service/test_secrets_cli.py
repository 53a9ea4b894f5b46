"""``wepush secrets``: a rotation adds and activates a key version, keeps the old ones, re-wraps every
secret without changing what it decrypts to, and an old version is retired only once nothing uses it.
A Service still holding the old ring opens re-wrapped secrets by adopting the new version from the file."""

from __future__ import annotations

import asyncio
import json
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.contract.repositories._world import add_workspace
from tests.helpers_secrets import add_account_secret
from wepush.cli.main import main
from wepush.server.composition._service import (
    StartupRefused,
    load_key_ring,
    preflight,
    reload_key_ring,
    sealed_key_versions,
)
from wepush.server.config import ServiceConfig, load_config
from wepush.server.domain import SecretRecord
from wepush.server.domain.secrets import MasterKeyError, sealed_secret_of
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database, upgrade_database
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyRing

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
VALUES = {"http-token": b"bearer-4f1c", "smtp-password": b"hunter2-but-longer"}


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ServiceConfig:
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_DATA_DIR", str(tmp_path / "data"))
    loaded = load_config(None)
    loaded.data_dir.mkdir(parents=True)
    upgrade_database(loaded.database.url)
    return loaded


async def _seal_secrets(config: ServiceConfig, store: LocalEnvelopeSecretStore) -> None:
    engine = create_database(config.database.url)
    try:
        uow = SqlUnitOfWorkFactory(engine)
        workspace = await add_workspace(uow, NOW)
        async with uow() as unit:
            for name, value in VALUES.items():
                await add_account_secret(
                    unit,
                    store,
                    workspace_id=workspace.id,
                    account_id="account-1",
                    name=name,
                    value=value,
                    now=NOW,
                )
    finally:
        await engine.dispose()


async def _records(config: ServiceConfig) -> list[SecretRecord]:
    engine = create_database(config.database.url)
    try:
        async with SqlUnitOfWorkFactory(engine)(read_only=True) as unit:
            return await unit.secret_records.list_not_wrapped_by(-1, 100)
    finally:
        await engine.dispose()


def _open(store: LocalEnvelopeSecretStore, record: SecretRecord) -> bytes:
    sealed = sealed_secret_of(record)
    return bytes(store.decrypt(sealed, record.workspace_id, record.id, record.name, record.record_version))


def test_rotate_rewraps_every_secret_and_retire_waits_until_nothing_uses_a_version(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    before = load_key_ring(config)  # creates the standalone key file, version 1
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(before)))
    key_text = config.secrets.master_key_file.read_text()

    assert main(["secrets", "retire", "1"]) == 1
    assert "1 is active" in capsys.readouterr().err
    assert main(["secrets", "rotate"]) == 0
    rotated = capsys.readouterr().out
    rotated_file = config.secrets.master_key_file.read_text()

    ring = load_key_ring(config)
    records = asyncio.run(_records(config))
    assert (ring.active_version, ring.versions) == (2, (1, 2))
    assert "master key version 2 is now active" in rotated
    assert "re-wrapped 2 secrets" in rotated
    assert {r.key_version for r in records} == {2}
    assert {r.name: _open(LocalEnvelopeSecretStore(ring), r) for r in records} == VALUES
    assert oct(config.secrets.master_key_file.stat().st_mode & 0o777) == "0o600"

    # A Service started before the rotation still holds only version 1.
    stale = LocalEnvelopeSecretStore(before)
    with pytest.raises(MasterKeyError):
        _open(stale, records[0])
    old_ring = MasterKeyRing.load_server(environ={"KEYS": key_text}, env_var="KEYS")
    adopting = LocalEnvelopeSecretStore(old_ring, reload=lambda: load_key_ring(config))
    assert {r.name: _open(adopting, r) for r in records} == VALUES
    # A Service started before the rotation seals what it writes next under the new active version,
    # so retiring version 1 below cannot orphan it.
    running = LocalEnvelopeSecretStore(
        MasterKeyRing.load_server(environ={"KEYS": key_text}, env_var="KEYS"),
        reload=lambda: load_key_ring(config),
    )
    assert running.encrypt("ws", "s-new", "token", 1, b"written after the rotation").key_version == 2

    assert main(["secrets", "rewrap"]) == 0
    assert "re-wrapped 0 secrets" in capsys.readouterr().out
    assert main(["secrets", "retire", "1"]) == 0
    assert "version 1 removed" in capsys.readouterr().out
    assert load_key_ring(config).versions == (2,)
    assert main(["secrets", "status"]) == 0
    status = capsys.readouterr().out
    assert "version 2: 2 secrets (in the key ring)" in status
    keys = list(json.loads(key_text)["keys"].values()) + list(json.loads(rotated_file)["keys"].values())
    assert len(keys) == 3
    assert not any(key in rotated + status for key in keys)


def test_retire_refuses_a_version_that_still_wraps_secrets(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    ring = load_key_ring(config)
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(ring)))
    ring.rotate()
    ring.save(config.secrets.master_key_file)  # a new version, but nothing re-wrapped yet

    assert main(["secrets", "retire", "1"]) == 1
    assert "2 secrets are still wrapped by master key version 1" in capsys.readouterr().err
    assert load_key_ring(config).versions == (1, 2)


def test_a_lost_standalone_key_file_is_refused_not_replaced_once_secrets_exist(config: ServiceConfig) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    config.secrets.master_key_file.unlink()

    with pytest.raises(StartupRefused) as refused:
        preflight(config)
    # A fresh key would start the Service and only fail later, on the first secret it cannot open.
    assert f"the key file {config.secrets.master_key_file} is missing" in str(refused.value)
    assert "holds 2 secrets" in str(refused.value)
    assert not config.secrets.master_key_file.exists()


def test_a_first_start_creates_the_standalone_key_file(config: ServiceConfig) -> None:
    assert not config.secrets.master_key_file.exists()
    preflight(config)  # migrated, but nothing sealed yet
    assert oct(config.secrets.master_key_file.stat().st_mode & 0o777) == "0o600"


def test_a_key_ring_without_a_version_secrets_were_sealed_with_is_refused_at_start(
    config: ServiceConfig,
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    replaced = MasterKeyRing.generate()
    replaced.rotate()
    replaced.retire(1)
    config.secrets.master_key_file.unlink()
    replaced.save(config.secrets.master_key_file)

    with pytest.raises(StartupRefused) as refused:
        preflight(config)
    assert "sealed under master key version 1, which the key file" in str(refused.value)
    assert load_key_ring(config).versions == (2,)  # nothing sealed is known here: no check


def test_a_key_file_holding_another_key_under_a_sealed_version_is_refused_at_start(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    original = config.secrets.master_key_file.read_bytes()
    config.secrets.master_key_file.unlink()
    assert main(["secrets", "init"]) == 0  # the lost key replaced by a new one, version 1 again
    assert load_key_ring(config).versions == (1,)

    with pytest.raises(StartupRefused) as refused:
        preflight(config)
    assert str(refused.value) == (
        f"master key: the key file {config.secrets.master_key_file} holds a different key under version 1 "
        "than the one the database's secrets were sealed with (it cannot open them); put back the key "
        "file backed up with this database"
    )
    config.secrets.master_key_file.unlink()
    config.secrets.master_key_file.write_bytes(original)
    config.secrets.master_key_file.chmod(0o600)
    preflight(config)  # the right key again: the Service starts
    capsys.readouterr()


def _replace_key_file_with_a_fresh_one(config: ServiceConfig) -> None:
    """What an operator does after losing the key file: ``secrets init`` makes a new key, version 1 again."""
    config.secrets.master_key_file.unlink()
    assert main(["secrets", "init"]) == 0


def test_rotate_and_rewrap_under_a_key_that_cannot_open_the_secrets_change_nothing(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    records = asyncio.run(_records(config))
    _replace_key_file_with_a_fresh_one(config)
    fresh = config.secrets.master_key_file.read_bytes()
    capsys.readouterr()

    for command in ("rotate", "rewrap"):
        assert main(["secrets", command]) == 1
        assert capsys.readouterr().err == (
            f"wepush secrets {command}: the key file {config.secrets.master_key_file} holds a different key "
            "under version 1 than the one the database's secrets were sealed with (it cannot open them); "
            "put back the key file backed up with this database; nothing was changed\n"
        )
        # Before, rotate had already added and activated version 2, then died on the first secret.
        assert config.secrets.master_key_file.read_bytes() == fresh
        assert asyncio.run(_records(config)) == records

    # The report is printed whole, and the exit status says it shows something to fix.
    assert main(["secrets", "status"]) == 1
    assert capsys.readouterr().out == (
        "active master key version: 1\n"
        "  version 1: 2 secrets (in the key ring under a DIFFERENT key: it cannot open them)\n"
    )


def test_status_exits_1_when_a_version_its_secrets_use_is_missing(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    assert main(["secrets", "rotate"]) == 0  # every secret now under version 2
    _replace_key_file_with_a_fresh_one(config)  # a lost key file made anew: version 1 only
    capsys.readouterr()

    assert main(["secrets", "status"]) == 1
    assert "  version 2: 2 secrets (MISSING from the key ring)\n" in capsys.readouterr().out


async def _spoil_dek(config: ServiceConfig, record_id: str) -> None:
    engine = create_database(config.database.url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE secret_record SET encrypted_dek = :dek WHERE id = :id"),
                {"dek": bytes(48), "id": record_id},
            )
    finally:
        await engine.dispose()


def test_a_secret_the_ring_cannot_open_stops_a_rewrap_in_one_line_naming_it(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    ring = load_key_ring(config)
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(ring)))
    oldest, spoilt = sorted(asyncio.run(_records(config)), key=lambda r: r.id)  # the check opens the oldest
    asyncio.run(_spoil_dek(config, spoilt.id))
    ring.rotate()
    ring.save(config.secrets.master_key_file)

    assert main(["secrets", "rewrap"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"wepush secrets rewrap: secret record {spoilt.id} (workspace {spoilt.workspace_id})"
    )
    assert "cannot be opened with master key version 1 of the key ring" in err
    assert "Traceback" not in err
    assert err.count("\n") == 1
    # Its batch rolled back as a whole: the secret that opens is re-wrapped by the next, mended run.
    assert {r.id: r.key_version for r in asyncio.run(_records(config))} == {oldest.id: 1, spoilt.id: 1}


def test_an_unreachable_database_is_refused_in_one_line_without_its_password(
    config: ServiceConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv(
        "WEPUSH_DATABASE_URL", f"postgresql+asyncpg://wepush:pw-never-shown@127.0.0.1:{closed}/x"
    )
    with pytest.raises(StartupRefused) as refused:
        preflight(load_config(None))
    assert str(refused.value).startswith("database: cannot read which master keys its secrets need:")
    assert "pw-never-shown" not in str(refused.value)


@pytest.mark.parametrize("command", ["status", "rewrap", "rotate"])
def test_the_secrets_commands_never_create_a_missing_key_file(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main(["secrets", command]) == 1
    assert f"master key file {config.secrets.master_key_file} does not exist" in capsys.readouterr().err
    assert not config.secrets.master_key_file.exists()


def test_a_running_service_reloads_the_ring_as_the_file_holds_it_after_a_retire(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    sealed_at_start = asyncio.run(sealed_key_versions(config.database.url))
    assert main(["secrets", "rotate"]) == 0
    assert main(["secrets", "retire", "1"]) == 0
    capsys.readouterr()
    # The start-up check would now refuse version 1; the running Service just adopts what the file holds.
    assert reload_key_ring(config).versions == (2,)
    with pytest.raises(StartupRefused):
        load_key_ring(config, sealed_at_start)
    config.secrets.master_key_file.unlink()
    with pytest.raises(MasterKeyError):
        reload_key_ring(config)  # never creates a key
    assert not config.secrets.master_key_file.exists()


def _server_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key_file = tmp_path / "etc" / "wepush" / "master.key"
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_MODE", "server")
    monkeypatch.setenv("WEPUSH_DATABASE_TYPE", "postgresql")
    monkeypatch.setenv("WEPUSH_DATABASE_URL", "postgresql+asyncpg://wepush@127.0.0.1:5432/wepush")
    monkeypatch.setenv("WEPUSH_SECRETS_MASTER_KEY_FILE", str(key_file))
    return key_file


def test_init_creates_the_private_key_file_a_server_mode_service_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = _server_mode(tmp_path, monkeypatch)
    with pytest.raises(MasterKeyError, match="does not exist"):
        load_key_ring(load_config(None))

    assert main(["secrets", "init"]) == 0

    report = capsys.readouterr().out
    assert f"created master key file {key_file} (mode 0600) with key version 1" in report
    assert (key_file.stat().st_mode & 0o777, key_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    key_text = json.loads(key_file.read_text())["keys"]["1"]
    assert key_text not in report
    ring = load_key_ring(load_config(None), {})
    assert (ring.active_version, ring.versions) == (1, (1,))


def test_init_never_replaces_a_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = _server_mode(tmp_path, monkeypatch)
    assert main(["secrets", "init"]) == 0
    before = key_file.read_bytes()

    assert main(["secrets", "init"]) == 1

    assert capsys.readouterr().err == (
        f"wepush secrets init: master key file {key_file} already exists; it is left as it is\n"
    )
    assert key_file.read_bytes() == before


def test_init_refuses_when_the_key_ring_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = _server_mode(tmp_path, monkeypatch)
    monkeypatch.setenv("WEPUSH_SECRETS_MASTER_KEY_ENV", "WEPUSH_MASTER_KEY")

    assert main(["secrets", "init"]) == 1

    assert "comes from the environment variable WEPUSH_MASTER_KEY" in capsys.readouterr().err
    assert not key_file.exists()


def _ring_of(path: Path) -> MasterKeyRing:
    return MasterKeyRing.load_server(environ={"KEYS": path.read_text()}, env_var="KEYS")


def test_a_staged_rotation_reaches_every_host_before_any_secret_is_wrapped_by_the_new_version(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    asyncio.run(_seal_secrets(config, LocalEnvelopeSecretStore(load_key_ring(config))))
    host_b = tmp_path / "host-b.key"  # the copy another instance reads
    host_b.write_text(config.secrets.master_key_file.read_text())
    b_store = LocalEnvelopeSecretStore(_ring_of(host_b), reload=lambda: _ring_of(host_b))

    assert main(["secrets", "add"]) == 0
    added = capsys.readouterr().out
    assert "master key version 2 added" in added
    assert "version 1 stays active" in added
    assert "wepush secrets activate 2" in added
    ring = load_key_ring(config)
    assert (ring.active_version, ring.versions) == (1, (1, 2))
    assert {r.key_version for r in asyncio.run(_records(config))} == {1}  # nothing wrapped by 2 yet

    host_b.write_text(config.secrets.master_key_file.read_text())  # the operator copies the file
    assert main(["secrets", "activate", "2"]) == 0
    activated = capsys.readouterr().out
    records = asyncio.run(_records(config))

    assert "master key version 2 is now active" in activated
    assert "re-wrapped 2 secrets" in activated
    assert {r.key_version for r in records} == {2}
    # Host B opens every secret although its own copy still names version 1 active, and what it seals
    # meanwhile (under version 1) host A opens as well.
    assert {r.name: _open(b_store, r) for r in records} == VALUES
    assert b_store.encrypt("ws", "s-b", "token", 1, b"sealed on host b").key_version == 1
    assert b_store.lacks({1, 2}) == []


def test_activate_refuses_a_version_the_key_file_does_not_hold(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    load_key_ring(config)
    before = config.secrets.master_key_file.read_text()

    assert main(["secrets", "activate", "5"]) == 1

    assert "version 5 is not in" in capsys.readouterr().err
    assert config.secrets.master_key_file.read_text() == before


def test_a_store_reports_the_versions_it_cannot_open_after_reading_its_file_again(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    ring = MasterKeyRing.create_file(path)
    store = LocalEnvelopeSecretStore(_ring_of(path), reload=lambda: _ring_of(path))
    assert store.lacks({1, 2}) == [2]
    ring.add_version()
    ring.save(path)
    assert store.lacks({1, 2}) == []  # the file now holds version 2: adopted
    assert store.lacks({3}) == [3]


def test_a_retired_version_number_is_never_issued_again(
    config: ServiceConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # Reused, a copy of the older file would hold another key under a number the secrets use.
    load_key_ring(config)
    assert main(["secrets", "add"]) == 0
    assert main(["secrets", "retire", "2"]) == 0
    assert main(["secrets", "add"]) == 0
    capsys.readouterr()

    ring = load_key_ring(config)
    assert ring.versions == (1, 3)
    assert json.loads(config.secrets.master_key_file.read_text())["retired"] == [2]
