from __future__ import annotations

import socket
from pathlib import Path

import pytest

from wepush.cli.main import main


def test_version_prints_the_product_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("wepush-next ")


def test_agent_command_says_it_has_not_landed_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent"]) != 0
    assert "not landed" in capsys.readouterr().err


def test_serve_with_a_bad_configuration_exits_with_a_clear_error(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEPUSH_SERVER_PROT", "1")
    assert main(["serve", "--data-dir", str(tmp_path)]) == 2
    assert "WEPUSH_SERVER_PROT" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["serve"], ["migrate"], ["secrets", "status"]])
def test_a_configuration_path_that_is_a_directory_is_a_configuration_error_not_a_traceback(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--config", str(tmp_path), "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert f"configuration error: {tmp_path}: cannot read the configuration file" in err
    assert "Traceback" not in err


@pytest.fixture
def no_log_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` routes the root logger to the stderr it finds; in a test that is capsys's, which closes."""
    monkeypatch.setattr("wepush.cli._serve.configure_logging", lambda *args, **kwargs: None)


@pytest.mark.usefixtures("no_log_setup")
def test_serve_without_the_server_master_key_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEPUSH_MODE", "server")
    monkeypatch.setenv("WEPUSH_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'server.db'}")
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    assert main(["serve", "--data-dir", str(tmp_path / "data")]) == 3
    err = capsys.readouterr().err
    assert "wepush serve: cannot start: master key:" in err
    assert "Traceback" not in err
    assert not (tmp_path / "config" / "master.key").exists()


@pytest.mark.usefixtures("no_log_setup")
def test_serve_with_an_unreachable_bucket_refuses_naming_it_not_its_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_ARTIFACTS_TYPE", "s3")
    monkeypatch.setenv("WEPUSH_ARTIFACTS_S3_BUCKET", "wepush-artifacts")
    monkeypatch.setenv("WEPUSH_ARTIFACTS_S3_ENDPOINT_URL", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("WEPUSH_ARTIFACTS_S3_ACCESS_KEY_ID", "access")
    monkeypatch.setenv("WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY", "s3-secret-never-printed")
    assert main(["serve", "--data-dir", str(tmp_path / "data")]) == 3
    err = capsys.readouterr().err
    assert "cannot start: artifacts: the artifact bucket 'wepush-artifacts' cannot be reached" in err
    assert "s3-secret-never-printed" not in err
    assert "Traceback" not in err


@pytest.mark.usefixtures("no_log_setup")
def test_serve_with_a_data_directory_that_is_a_file_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    not_a_directory = tmp_path / "data"
    not_a_directory.write_text("a file where the data directory should be\n", encoding="utf-8")
    assert main(["serve", "--data-dir", str(not_a_directory)]) == 3
    err = capsys.readouterr().err
    assert (
        f"wepush serve: cannot start: cannot prepare the data directory (File exists: {not_a_directory})"
        in err
    )
    assert "Traceback" not in err
