"""``wepush token issue-system-admin``: the operator replaces (or recovers) the bootstrap token at the host."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from tests.helpers_app import running_app, standalone_config
from wepush.cli.main import main

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
        (["--expires-at", "2020-01-01T00:00:00Z"], "in the past"),
        (["--expires-at", "2099-01-01T00:00:00"], "needs a time zone"),
        (["--expires-at", "next week"], "is not an RFC 3339 instant"),
        (["--name", " "], "--name must be"),
    ],
)
async def test_bad_arguments_issue_nothing(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    config = standalone_config(tmp_path)
    async with running_app(config):
        pass
    output = tmp_path / "never.token"

    assert await _cli("--name", "x", "--output", str(output), *extra) == 1

    assert says in capsys.readouterr().err
    assert not output.exists()


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
