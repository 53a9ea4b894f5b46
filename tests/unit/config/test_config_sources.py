"""A configuration error names where the bad value was set (the file, the environment variable, the flag),
and an environment variable that would do nothing is an error, not silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from wepush.cli.main import main
from wepush.server.config import ConfigError, load_config


def test_an_environment_value_error_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(environ={"WEPUSH_SERVER_PORT": "abc", "WEPUSH_DATA_DIR": str(tmp_path)})

    # It used to say "effective configuration: wepush.server.port: …", leaving the operator to guess.
    assert str(raised.value) == (
        "environment variable WEPUSH_SERVER_PORT: wepush.server.port: must be of type integer, not string"
    )


def test_the_source_named_is_the_one_whose_value_is_used(tmp_path: Path) -> None:
    file = tmp_path / "wepush.yaml"
    file.write_text("wepush:\n  server:\n    port: 19000\n  events:\n    sse-heartbeat: PT0S\n")
    environ = {"WEPUSH_DATA_DIR": str(tmp_path)}

    with pytest.raises(ConfigError) as from_file:
        load_config(file, environ=environ)
    with pytest.raises(ConfigError) as from_env:
        load_config(file, environ={**environ, "WEPUSH_EVENTS_SSE_HEARTBEAT": "PT0S"})
    with pytest.raises(ConfigError) as from_flag:
        load_config(environ={**environ, "WEPUSH_SERVER_PORT": "19001"}, port=70000)

    assert str(from_file.value) == f"{file}: wepush.events.sse-heartbeat: must be longer than PT0S"
    assert str(from_env.value) == (
        "environment variable WEPUSH_EVENTS_SSE_HEARTBEAT: wepush.events.sse-heartbeat: must be longer than PT0S"
    )
    assert str(from_flag.value) == "--port: wepush.server.port: must be at most 65535"


def test_the_master_key_variable_without_master_key_env_is_an_error_saying_what_to_set(
    tmp_path: Path,
) -> None:
    environ = {
        "WEPUSH_DATA_DIR": str(tmp_path),
        "WEPUSH_CONFIG_DIR": str(tmp_path / "config"),
        "WEPUSH_MASTER_KEY": "1:never-quoted-key-text",
    }

    with pytest.raises(ConfigError) as raised:
        load_config(environ=environ)

    # It used to be ignored: the key came from the file while the operator believed it came from here.
    assert str(raised.value) == (
        "environment variable WEPUSH_MASTER_KEY is set, but the master key is read from the key file "
        f"{tmp_path / 'config' / 'master.key'}: set secrets.master-key-env: WEPUSH_MASTER_KEY (or "
        "WEPUSH_SECRETS_MASTER_KEY_ENV=WEPUSH_MASTER_KEY) to read it from the variable, or unset the variable"
    )
    assert "never-quoted" not in str(raised.value)


def test_the_master_key_variable_is_taken_when_master_key_env_names_it(tmp_path: Path) -> None:
    file = tmp_path / "wepush.yaml"
    file.write_text("wepush:\n  secrets:\n    master-key-env: WEPUSH_MASTER_KEY\n")
    environ = {"WEPUSH_DATA_DIR": str(tmp_path), "WEPUSH_MASTER_KEY": "1:key-text"}

    assert load_config(file, environ=environ).secrets.master_key_env == "WEPUSH_MASTER_KEY"
    named_in_env = load_config(environ={**environ, "WEPUSH_SECRETS_MASTER_KEY_ENV": "WEPUSH_MASTER_KEY"})
    assert named_in_env.secrets.master_key_env == "WEPUSH_MASTER_KEY"


def test_a_master_key_variable_named_in_the_environment_is_not_taken_for_a_configuration_key(
    tmp_path: Path,
) -> None:
    environ = {
        "WEPUSH_DATA_DIR": str(tmp_path),
        "WEPUSH_SECRETS_MASTER_KEY_ENV": "WEPUSH_PROD_KEY",
        "WEPUSH_PROD_KEY": "1:key-text",
    }

    # Before, only a name given in the file was skipped: this one was "not a configuration key".
    assert load_config(environ=environ).secrets.master_key_env == "WEPUSH_PROD_KEY"
    with pytest.raises(
        ConfigError,
        match="WEPUSH_MASTER_KEY is set, but the master key is read from the "
        "environment variable WEPUSH_PROD_KEY",
    ):
        load_config(environ={**environ, "WEPUSH_MASTER_KEY": "1:key-text"})


def test_the_master_key_variable_is_a_configuration_error_of_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WEPUSH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WEPUSH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("WEPUSH_MASTER_KEY", "1:key-text")

    assert main(["secrets", "status"]) == 2
    assert main(["serve"]) == 2

    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ", 2)[:2] for line in err] == [
        ["wepush secrets", "configuration error"],
        ["wepush serve", "configuration error"],
    ]
    assert all("WEPUSH_MASTER_KEY is set" in line for line in err)
