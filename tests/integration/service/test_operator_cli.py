"""The operator commands at the host (``migrate``, ``secrets``, ``token``) end in one line on standard
error when the database cannot be used — no stack trace, no password from ``database.url`` — and never
create an empty SQLite database where the operator pointed at the wrong data directory."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from tests.fixtures.db import POSTGRES_ADMIN_DSN, run_blocking
from tests.fixtures.releases import NEWER_REVISION, migrate_with, newer_release
from wepush.cli.main import main
from wepush.server.composition._service import StartupRefused, load_key_ring, preflight
from wepush.server.config import load_config
from wepush.server.infra.db import current_revision, head_revision, upgrade_database

PASSWORD = "pw-never-shown-4c1d"
OLDER_REVISION = "0001_initial"  # any revision before head
COMMANDS = [
    ["migrate"],
    ["secrets", "status"],
    ["secrets", "rewrap"],
    ["secrets", "rotate"],
    ["token", "issue-system-admin", "--name", "ops", "--output", "-"],
]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_DATA_DIR", str(tmp_path / "data"))
    config = load_config(None)
    config.data_dir.mkdir(parents=True)
    load_key_ring(config)  # the key file a first start writes: the commands get as far as the database
    return config.data_dir


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _one_line_failure(capsys: pytest.CaptureFixture[str], command: list[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"wepush {' '.join(command[:2]) if command[0] != 'migrate' else 'migrate'}: ")
    assert "Traceback" not in captured.err
    assert PASSWORD not in captured.err + captured.out
    assert captured.out == ""
    return lines[0]


def test_migrate_says_what_it_did_to_the_schema(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = load_config(None).database.url
    upgrade_database(url, revision=OLDER_REVISION)
    assert main(["migrate"]) == 0
    upgraded = capsys.readouterr().out.strip()
    assert main(["migrate"]) == 0
    again = capsys.readouterr().out.strip()

    # A brand-new database used to be reported "up to date" after every table had just been created.
    assert (
        upgraded
        == f"wepush migrate: database schema upgraded from revision {OLDER_REVISION} to {head_revision()}"
    )
    assert again == "wepush migrate: database schema is up to date; nothing to do"


def test_migrate_on_a_new_database_says_it_created_the_schema(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"wepush migrate: database schema created at revision {head_revision()}"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_an_unreachable_database_server_is_one_line_without_its_password(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setenv(
        "WEPUSH_DATABASE_URL", f"postgresql+asyncpg://wepush:{PASSWORD}@127.0.0.1:{_closed_port()}/wepush"
    )

    key_file = load_config(None).secrets.master_key_file
    keys_before = key_file.read_bytes()

    assert main(command) == 1

    line = _one_line_failure(capsys, command)
    assert "database" in line
    assert key_file.read_bytes() == keys_before  # a refused rotation adds no key version


@pytest.mark.parametrize("command", COMMANDS[1:], ids=lambda c: "-".join(c[:2]))
def test_a_missing_sqlite_database_is_refused_and_not_created(
    data_dir: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    database = data_dir / "wepush-next.db"
    assert load_config(None).database.url.endswith(str(database))

    assert main(command) == 1

    assert f"{database} does not exist" in _one_line_failure(capsys, command)
    assert not database.exists()


def test_a_data_directory_that_cannot_be_created_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_DATA_DIR", str(blocker / "data"))

    assert main(["migrate"]) == 1

    assert str(blocker / "data") in _one_line_failure(capsys, ["migrate"])


@pytest.mark.postgres
def test_a_database_the_server_does_not_have_is_named_by_the_driver_error_class(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = POSTGRES_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    monkeypatch.setenv("WEPUSH_DATABASE_URL", f"{server}/wepush_no_such_db")

    assert main(["migrate"]) == 1

    assert "(InvalidCatalogNameError)" in _one_line_failure(capsys, ["migrate"])


def _migrated_by_a_newer_release(data_dir: Path) -> str:
    url = load_config(None).database.url
    upgrade_database(url)
    database = data_dir / "wepush-next.db"
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0099_from_a_newer_release'")
    return url


NEWER = (
    "the database schema is at revision 0099_from_a_newer_release, which this release does not know (a "
    "newer release migrated it); run that release, or restore the database backed up before the upgrade"
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_a_schema_a_newer_release_migrated_is_named_and_left_as_it_is(
    data_dir: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    url = _migrated_by_a_newer_release(data_dir)

    assert main(command) == 1

    # Before, migrate ended in Alembic's traceback and the others told the operator to run migrate.
    assert _one_line_failure(capsys, command).endswith(f": {NEWER}")
    assert current_revision(url) == "0099_from_a_newer_release"


def test_a_service_does_not_start_on_a_schema_a_newer_release_migrated(data_dir: Path) -> None:
    url = _migrated_by_a_newer_release(data_dir)

    with pytest.raises(StartupRefused) as refused:
        preflight(load_config(None))

    # Before, standalone's start-up upgrade logged Alembic's traceback and uvicorn gave up.
    assert str(refused.value) == f"database: {NEWER}"
    assert current_revision(url) == "0099_from_a_newer_release"


def test_on_a_schema_a_newer_release_declared_fit_the_commands_run_and_migrate_changes_nothing(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = load_config(None).database.url
    upgrade_database(url)
    run_blocking(lambda: migrate_with(url, newer_release(tmp_path, compatible_from=head_revision())))
    capsys.readouterr()

    assert main(["migrate"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"wepush migrate: nothing to do; the database schema is at revision {NEWER_REVISION} of a newer "
        f"release, which runs releases from revision {head_revision()} on"
    )
    # Before, refused: "the database schema is not at the current revision; run 'wepush migrate' first".
    assert main(["secrets", "rewrap"]) == 0
    assert capsys.readouterr().err == ""
    assert current_revision(url) == NEWER_REVISION


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_a_sqlite_database_that_cannot_be_opened_is_named_as_sqlite_says_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # A directory where the database file should be: what a data directory on a read-only or vanished
    # mount gives too. There is no server to check, and SQLite's text quotes no credential.
    monkeypatch.setenv("WEPUSH_DATABASE_URL", f"sqlite+aiosqlite:///{data_dir}")

    assert main(command) == 1

    line = _one_line_failure(capsys, command)
    assert line.endswith(": cannot use the SQLite database (unable to open database file)")
    assert "server" not in line


def test_a_read_only_sqlite_database_says_so(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = data_dir / "read-only.db"
    database.touch()
    monkeypatch.setenv("WEPUSH_DATABASE_URL", f"sqlite+aiosqlite:///file:{database}?mode=ro&uri=true")

    assert main(["migrate"]) == 1

    # It used to say "cannot use the database (OperationalError); check database.url and its server".
    assert _one_line_failure(capsys, ["migrate"]) == (
        "wepush migrate: cannot use the SQLite database (attempt to write a readonly database)"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_a_database_server_that_never_answers_is_named_with_the_time_waited(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # The kernel completes the connection of a listening socket nobody accepts from: the server "accepts"
    # and then never answers. asyncpg's connection timeout (60 s unless told) is shortened for the test.
    monkeypatch.setitem(asyncpg.connect.__kwdefaults__, "timeout", 0.5)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        monkeypatch.setenv(
            "WEPUSH_DATABASE_URL", f"postgresql+asyncpg://wepush:{PASSWORD}@127.0.0.1:{port}/w"
        )

        assert main(command) == 1

    # It used to say "cannot reach the database server ()": a TimeoutError has no text of its own.
    assert _one_line_failure(capsys, command).endswith(
        ": cannot reach the database server (no answer within 0.5 s); check database.url"
    )
