"""``wepush token issue-system-admin``: the operator replaces (or recovers) the bootstrap token at the host."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.helpers_app import running_app, standalone_config
from wepush.cli.main import main
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
from wepush.server.infra.secrets import MasterKeyRing

API = "/api/v1"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The command reads the configuration the Service reads: the same directories.
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


async def _cli(*args: str) -> int:
    # In a thread: the command runs its own event loop.
    return await asyncio.to_thread(main, ["token", "issue-system-admin", *args])


async def test_a_new_system_admin_token_replaces_the_bootstrap_one(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        bootstrap = app.admin()
    output = tmp_path / "ops.token"

    assert await _cli("--name", "ops", "--output", str(output), "--expires-at", "2099-01-01T00:00:00Z") == 0

    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    token = output.read_text().strip()
    reported = capsys.readouterr()
    assert token not in reported.out + reported.err
    assert "SYSTEM_ADMIN token" in reported.err
    async with running_app(config) as app:
        ops = {"Authorization": f"Bearer {token}"}
        # Creating a workspace takes SYSTEM_ADMIN: no workspace role would do.
        assert (
            await app.client.post(f"{API}/workspaces", headers=ops, json={"name": "team"})
        ).status_code == 201
        [ws] = (await app.client.get(f"{API}/workspaces", headers=ops, params={"name": "default"})).json()[
            "items"
        ]
        listed = (await app.client.get(f"{API}/workspaces/{ws['id']}/api-tokens", headers=ops)).json()[
            "items"
        ]
        by_name = {t["name"]: t for t in listed}
        assert (by_name["ops"]["systemAdmin"], by_name["ops"]["expiresAt"]) == (True, "2099-01-01T00:00:00Z")
        revoked = await app.client.delete(
            f"{API}/workspaces/{ws['id']}/api-tokens/{by_name['bootstrap-admin']['id']}", headers=ops
        )
        assert revoked.status_code == 204
        assert (await app.client.get(f"{API}/workspaces", headers=bootstrap)).status_code == 401
        events = (
            await app.client.get(
                f"{API}/workspaces/{ws['id']}/audit-events", headers=ops, params={"action": "token.create"}
            )
        ).json()["items"]
        issued = [e for e in events if e["resourceId"] == by_name["ops"]["id"]]
        assert [(e["actor"]["type"], e["actor"]["id"]) for e in issued] == [("SYSTEM", "wepush-cli")]


async def test_the_token_goes_to_standard_output_only_when_asked(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config):
        pass

    assert await _cli("--name", "piped", "--output", "-") == 0

    printed = capsys.readouterr()
    token = printed.out.strip()
    assert token
    assert token not in printed.err
    async with running_app(config) as app:
        answer = await app.client.get(f"{API}/workspaces", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--expires-at", "2020-01-01T00:00:00Z"], "argument --expires-at: is in the past"),
        (["--expires-at", "2099-01-01T00:00:00"], "argument --expires-at: needs a time zone"),
        (["--expires-at", "tomorrow"], "argument --expires-at: 'tomorrow' is not an RFC 3339 instant"),
        (["--name", ""], "argument --name: must be 1..200 printable characters"),
        (["--name", " "], "argument --name: must be 1..200 printable characters"),
    ],
)
async def test_bad_argument_values_are_usage_errors_and_issue_nothing(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        before = await _token_names(app)
    output = tmp_path / "never.token"

    # Exit 2, as argparse's own errors (a missing --name): a script tells a bad invocation from a
    # database that is down (1). They used to exit 1.
    with pytest.raises(SystemExit) as exited:
        await _cli("--name", "x", "--output", str(output), *extra)

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"wepush token issue-system-admin: error: {says}" in err
    assert "Traceback" not in err
    assert not output.exists()
    async with running_app(config) as app:
        assert await _token_names(app) == before


async def test_an_existing_file_is_never_written_over_and_no_token_is_issued(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        before = await _token_names(app)
    kept = tmp_path / "notes.txt"
    kept.write_text("mine\n")

    assert await _cli("--name", "ops", "--output", str(kept)) == 1

    assert "already exists" in capsys.readouterr().err
    assert kept.read_text() == "mine\n"
    async with running_app(config) as app:
        assert await _token_names(app) == before


async def test_a_key_file_holding_another_key_is_refused_in_one_line_and_issues_nothing(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recovery command meets the wrong key file exactly when the operator is recovering: it used to
    end in a SecretDecryptionError traceback. Now it says what rotate says of the same key file."""
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        before = await _token_names(app)
    key_file = tmp_path / "config" / "master.key"
    original = key_file.read_bytes()
    key_file.unlink()
    MasterKeyRing.create_standalone(key_file)  # another install's key: version 1 too, another key
    capsys.readouterr()
    output = tmp_path / "ops.token"

    assert await _cli("--name", "ops", "--output", str(output)) == 1

    assert capsys.readouterr().err == (
        f"wepush token issue-system-admin: the key file {key_file} holds a different key under version 1 "
        "than the one the database's secrets were sealed with (it cannot open them); put back the key file "
        "backed up with this database; no token was issued\n"
    )
    assert not output.exists()
    key_file.write_bytes(original)  # the right key back: the Service starts, and holds no new token
    async with running_app(config) as app:
        assert await _token_names(app) == before


async def test_a_secret_the_key_ring_cannot_open_ends_the_command_in_one_line(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ring opens the oldest secret (the check before anything is issued), but not another one the
    command needs: whatever the secret store raises ends in one line, not a traceback."""
    config = standalone_config(tmp_path)
    async with running_app(config):
        pass
    await _spoil_every_secret_but_the_oldest(config.database.url)
    capsys.readouterr()
    output = tmp_path / "ops.token"

    assert await _cli("--name", "ops", "--output", str(output)) == 1

    assert capsys.readouterr().err == (
        "wepush token issue-system-admin: secret could not be decrypted with the master key ring; "
        "'wepush secrets status' shows which key versions it cannot open\n"
    )
    assert not output.exists()


async def _spoil_every_secret_but_the_oldest(url: str) -> None:
    engine = create_database(url)
    try:
        async with SqlUnitOfWorkFactory(engine)(read_only=True) as unit:
            oldest = await unit.secret_records.first_wrapped_by(1)
        assert oldest is not None
        async with engine.begin() as connection:
            spoilt = await connection.execute(
                text("UPDATE secret_record SET encrypted_dek = :dek WHERE id != :id"),
                {"dek": bytes(48), "id": oldest.id},
            )
        assert spoilt.rowcount >= 1
    finally:
        await engine.dispose()


async def test_a_database_the_service_never_started_on_is_refused(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await _cli("--name", "ops", "--output", str(tmp_path / "t")) == 1

    assert "cannot open the database" in capsys.readouterr().err


async def _token_names(app: object) -> list[str]:
    client = app.client  # type: ignore[attr-defined]
    ws = (await client.get(f"{API}/workspaces", headers=app.admin())).json()["items"][0]["id"]  # type: ignore[attr-defined]
    listed = await client.get(f"{API}/workspaces/{ws}/api-tokens", headers=app.admin())  # type: ignore[attr-defined]
    return sorted(t["name"] for t in listed.json()["items"])


async def test_a_renamed_default_workspace_is_still_found_by_the_service_and_the_command(
    tmp_path: Path, data_dir: Path
) -> None:
    """The default workspace is found by the keys it holds, not by its name: renamed by an ADMIN, the
    Service used to fail its next start (and create a stray "default") and the command to refuse."""
    config = standalone_config(tmp_path)
    async with running_app(config) as app:
        [ws] = (await app.client.get(f"{API}/workspaces", headers=app.admin())).json()["items"]
        renamed = await app.client.put(
            f"{API}/workspaces/{ws['id']}",
            headers=app.admin(),
            json={"name": "head office", "version": ws["version"]},
        )
        assert renamed.status_code == 200, renamed.text

    assert await _cli("--name", "after-rename", "--output", str(tmp_path / "ops.token")) == 0

    async with running_app(config) as app:
        listed = (await app.client.get(f"{API}/workspaces", headers=app.admin())).json()["items"]
        ops = {"Authorization": f"Bearer {(tmp_path / 'ops.token').read_text().strip()}"}
        tokens = (await app.client.get(f"{API}/workspaces/{ws['id']}/api-tokens", headers=ops)).json()
    assert [(w["id"], w["name"]) for w in listed] == [(ws["id"], "head office")]
    assert {t["name"] for t in tokens["items"]} == {"bootstrap-admin", "after-rename"}


async def test_a_workspace_admin_cannot_give_a_system_admin_token_a_role(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A role would tell a workspace ADMIN the token exists, and end the auditing of its reads there as a
    SYSTEM_ADMIN's; the bootstrap token was refused already, a CLI-issued one is refused alike."""
    config = standalone_config(tmp_path)
    async with running_app(config):
        pass
    output = tmp_path / "ops.token"
    assert await _cli("--name", "ops", "--output", str(output)) == 0
    ops = {"Authorization": f"Bearer {output.read_text().strip()}"}
    async with running_app(config) as app:
        team = (await app.client.post(f"{API}/workspaces", headers=ops, json={"name": "team"})).json()["id"]
        issued = await app.client.post(
            f"{API}/workspaces/{team}/api-tokens", headers=ops, json={"name": "team-admin", "role": "ADMIN"}
        )
        admin = {"Authorization": f"Bearer {issued.json()['token']}"}
        [default] = (
            await app.client.get(f"{API}/workspaces", headers=ops, params={"name": "default"})
        ).json()["items"]
        tokens = (await app.client.get(f"{API}/workspaces/{default['id']}/api-tokens", headers=ops)).json()[
            "items"
        ]
        ops_id = next(t["id"] for t in tokens if t["name"] == "ops")
        granted = await app.client.put(
            f"{API}/workspaces/{team}/members/{ops_id}", headers=admin, json={"role": "VIEWER"}
        )
        await app.client.get(f"{API}/workspaces/{team}/accounts", headers=ops)
        audited = (
            await app.client.get(
                f"{API}/workspaces/{team}/audit-events",
                headers=admin,
                params={"action": "system_admin.access"},
            )
        ).json()["items"]

    assert granted.status_code == 404, granted.text
    assert granted.json()["code"] == "RESOURCE_NOT_FOUND"
    assert any(e["actor"]["id"] == ops_id for e in audited)
