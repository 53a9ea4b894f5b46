from __future__ import annotations

import re
import socket
from datetime import timedelta
from pathlib import Path

import pytest

from wepush.server.config import ConfigError, load_config, render_effective_config


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_standalone_defaults_follow_the_seed(tmp_path: Path) -> None:
    config = load_config(environ={"WEPUSH_CONFIG_DIR": str(tmp_path / "cfg")}, data_dir=tmp_path / "data")
    assert config.mode == "standalone"
    assert config.server.bind_address == "127.0.0.1"
    assert config.server.port == 18990
    assert config.database.type == "sqlite"
    assert config.database.url.endswith(str(tmp_path / "data" / "wepush-next.db"))
    assert config.artifacts.directory == tmp_path / "data" / "artifacts"
    assert config.secrets.master_key_file == tmp_path / "cfg" / "master.key"
    assert config.agent.max_runs == 2
    assert config.agent.max_concurrency == 200
    assert config.events.progress_interval == timedelta(seconds=1)
    assert config.events.sse_heartbeat == timedelta(seconds=15)


def test_file_is_overridden_by_environment_which_is_overridden_by_flags(tmp_path: Path) -> None:
    file = _write(
        tmp_path / "wepush.yaml",
        "wepush:\n  server:\n    port: 19000\n    bind-address: 127.0.0.2\n  agent:\n    embedded:\n      max-runs: 4\n",
    )
    env = {
        "WEPUSH_SERVER_PORT": "19001",
        "WEPUSH_AGENT_EMBEDDED_MAX_RUNS": "6",
        "WEPUSH_DATA_DIR": str(tmp_path),
    }
    config = load_config(file, environ=env)
    assert config.server.port == 19001
    assert config.server.bind_address == "127.0.0.2"
    assert config.agent.max_runs == 6
    flagged = load_config(file, environ=env, port=19002, host="127.0.0.3")
    assert flagged.server.port == 19002
    assert flagged.server.bind_address == "127.0.0.3"


def test_data_dir_comes_from_the_environment_and_expands_in_paths(tmp_path: Path) -> None:
    env = {"WEPUSH_DATA_DIR": str(tmp_path / "d"), "WEPUSH_CONFIG_DIR": str(tmp_path / "c")}
    config = load_config(environ=env)
    assert config.data_dir == tmp_path / "d"
    assert config.plugins.directory == tmp_path / "d" / "plugins"
    assert config.security.bootstrap_token_file == tmp_path / "d" / "bootstrap-admin.token"


def test_config_file_in_config_dir_is_found(tmp_path: Path) -> None:
    _write(tmp_path / "wepush.yaml", "wepush:\n  server:\n    port: 18001\n")
    config = load_config(environ={"WEPUSH_CONFIG_DIR": str(tmp_path), "WEPUSH_DATA_DIR": str(tmp_path)})
    assert config.server.port == 18001


def test_unknown_key_in_file_is_an_error_naming_it(tmp_path: Path) -> None:
    file = _write(tmp_path / "wepush.yaml", "wepush:\n  server:\n    prot: 1\n")
    with pytest.raises(ConfigError, match="prot"):
        load_config(file, environ={"WEPUSH_DATA_DIR": str(tmp_path)})


def test_a_configuration_file_that_cannot_be_read_is_an_error_naming_it(tmp_path: Path) -> None:
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes(b"wepush:\n  server:\n    bind-address: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"latin1\.yaml: not UTF-8 text"):
        load_config(binary, environ={"WEPUSH_DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        load_config(tmp_path, environ={"WEPUSH_DATA_DIR": str(tmp_path)})


def test_unknown_environment_variable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="WEPUSH_SERVER_PROT"):
        load_config(environ={"WEPUSH_SERVER_PROT": "1", "WEPUSH_DATA_DIR": str(tmp_path)})


def test_wrong_type_is_an_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="port"):
        load_config(environ={"WEPUSH_SERVER_PORT": "not-a-number", "WEPUSH_DATA_DIR": str(tmp_path)})


def test_progress_interval_outside_the_seed_window_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="progress-interval"):
        load_config(environ={"WEPUSH_EVENTS_PROGRESS_INTERVAL": "PT5S", "WEPUSH_DATA_DIR": str(tmp_path)})


@pytest.mark.parametrize(
    ("value", "says"), [("soon", "does not match"), ("P9999999999D", "duration out of range: 'P9999999999D'")]
)
def test_a_malformed_or_out_of_range_duration_is_an_error_naming_the_key(
    tmp_path: Path, value: str, says: str
) -> None:
    # Out of range used to escape as an OverflowError with a traceback instead of a ConfigError.
    with pytest.raises(ConfigError, match="wepush.events.sse-heartbeat: .*" + re.escape(says)):
        load_config(environ={"WEPUSH_EVENTS_SSE_HEARTBEAT": value, "WEPUSH_DATA_DIR": str(tmp_path)})


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        # An out-of-range presign-ttl escaped as a ValueError traceback naming no key.
        ("WEPUSH_ARTIFACTS_S3_PRESIGN_TTL", "P9999999999D", "duration out of range: 'P9999999999D'"),
        ("WEPUSH_ARTIFACTS_S3_PRESIGN_TTL", "PT0S", "must be between PT1S and P7D"),
        ("WEPUSH_ARTIFACTS_S3_PRESIGN_TTL", "P8D", "must be between PT1S and P7D"),
        # A zero heartbeat sent heartbeats, each checking the stream's token, in a busy loop.
        ("WEPUSH_EVENTS_SSE_HEARTBEAT", "PT0S", "must be longer than PT0S"),
    ],
    ids=["presign-ttl-out-of-range", "presign-ttl-zero", "presign-ttl-beyond-s3", "heartbeat-zero"],
)
def test_a_duration_outside_what_the_service_can_use_is_an_error_naming_the_key(
    tmp_path: Path, name: str, value: str, says: str
) -> None:
    key = (
        "wepush."
        + {
            "WEPUSH_ARTIFACTS_S3_PRESIGN_TTL": "artifacts.s3.presign-ttl",
            "WEPUSH_EVENTS_SSE_HEARTBEAT": "events.sse-heartbeat",
        }[name]
    )
    with pytest.raises(ConfigError) as error:
        load_config(environ={name: value, "WEPUSH_DATA_DIR": str(tmp_path)})
    assert str(error.value).startswith(f"environment variable {name}: {key}: {says}")


@pytest.mark.parametrize("value", [".nan", ".NaN"])
def test_a_number_that_is_not_a_number_is_an_error_naming_the_key(tmp_path: Path, value: str) -> None:
    # NaN passed the schema's "at least 0" (no comparison with NaN fails) and turned rate limiting off.
    file = _write(
        tmp_path / "wepush.yaml",
        f"wepush:\n  security:\n    rate-limit:\n      requests-per-second: {value}\n",
    )
    with pytest.raises(
        ConfigError,
        match=rf"^{re.escape(str(file))}: wepush\.security\.rate-limit\.requests-per-second: must be a finite",
    ):
        load_config(file, environ={"WEPUSH_DATA_DIR": str(tmp_path)})
    with pytest.raises(
        ConfigError,
        match=r"^environment variable WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND: "
        r"wepush\.security\.rate-limit\.requests-per-second: must be a finite",
    ):
        load_config(
            environ={
                "WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND": value,
                "WEPUSH_DATA_DIR": str(tmp_path),
            }
        )


def test_server_mode_needs_a_database_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"database\.url"):
        load_config(environ={"WEPUSH_MODE": "server", "WEPUSH_DATA_DIR": str(tmp_path)})


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://wepush:pw-not-shown@db/wepush", "unsupported database 'mysql'; use sqlite or postgresql"),
        ("pw-not-shown", "not a database URL"),
        ("postgresql://wepush:pw-not-shown@db:port/wepush", "not a database URL"),
    ],
    ids=["mysql", "not-a-url", "bad-port"],
)
def test_a_database_url_the_service_cannot_open_is_an_error_naming_the_key_not_the_url(
    tmp_path: Path, url: str, says: str
) -> None:
    # These used to pass, and end later in a ValueError or ArgumentError traceback from SQLAlchemy.
    with pytest.raises(ConfigError) as error:
        load_config(environ={"WEPUSH_DATABASE_URL": url, "WEPUSH_DATA_DIR": str(tmp_path)})
    assert str(error.value).startswith(
        f"environment variable WEPUSH_DATABASE_URL: wepush.database.url: {says}"
    )
    assert "pw-not-shown" not in str(error.value)


def test_a_postgresql_database_type_without_a_url_is_an_error_not_sqlite(tmp_path: Path) -> None:
    # It used to fall back to the data directory's SQLite file, whatever database.type said.
    with pytest.raises(ConfigError, match=r"^wepush\.database\.url: database\.type postgresql needs"):
        load_config(environ={"WEPUSH_DATABASE_TYPE": "postgresql", "WEPUSH_DATA_DIR": str(tmp_path)})


def test_a_postgresql_database_type_with_a_sqlite_url_is_an_error(tmp_path: Path) -> None:
    # It used to run on the SQLite file, while database.type (and the printed configuration) said PostgreSQL.
    environ = {
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'stale.db'}",
        "WEPUSH_DATA_DIR": str(tmp_path),
    }
    with pytest.raises(ConfigError) as error:
        load_config(environ=environ)
    assert str(error.value) == (
        "environment variable WEPUSH_DATABASE_URL: wepush.database.url: database.type is postgresql, but the "
        "URL names a sqlite database"
    )


def test_the_database_type_follows_the_url_when_only_the_url_is_given(tmp_path: Path) -> None:
    config = load_config(
        environ={
            "WEPUSH_DATABASE_URL": "postgresql://wepush@db.internal/wepush",
            "WEPUSH_DATA_DIR": str(tmp_path),
        }
    )
    assert config.database.type == "postgresql"
    assert "type: postgresql" in render_effective_config(config)  # before, the default said sqlite
    assert load_config(environ={"WEPUSH_DATA_DIR": str(tmp_path)}).database.type == "sqlite"


def test_an_s3_artifact_store_needs_its_bucket(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"wepush\.artifacts\.s3\.bucket"):
        load_config(environ={"WEPUSH_ARTIFACTS_TYPE": "s3", "WEPUSH_DATA_DIR": str(tmp_path)})
    config = load_config(
        environ={
            "WEPUSH_ARTIFACTS_TYPE": "s3",
            "WEPUSH_ARTIFACTS_S3_BUCKET": "wepush-artifacts",
            "WEPUSH_ARTIFACTS_S3_ENDPOINT_URL": "https://minio.internal:9000",
            "WEPUSH_DATA_DIR": str(tmp_path),
        }
    )
    assert (config.artifacts.type, config.artifacts.s3.bucket) == ("s3", "wepush-artifacts")
    assert config.artifacts.s3.endpoint_url == "https://minio.internal:9000"


def test_environment_values_take_the_type_the_schema_gives_their_key(tmp_path: Path) -> None:
    # A secret, a bucket or an access key made only of digits (or spelled like a YAML boolean) stays the
    # string it was given; only keys typed as numbers or booleans are read as numbers or booleans.
    config = load_config(
        environ={
            "WEPUSH_ARTIFACTS_TYPE": "s3",
            "WEPUSH_ARTIFACTS_S3_BUCKET": "20261203",
            "WEPUSH_ARTIFACTS_S3_ACCESS_KEY_ID": "0012",
            "WEPUSH_ARTIFACTS_S3_SECRET_ACCESS_KEY": "123456789",
            "WEPUSH_ARTIFACTS_S3_REGION": "yes",
            "WEPUSH_SERVER_PORT": "19003",
            "WEPUSH_DATABASE_ECHO": "true",
            "WEPUSH_SECURITY_RATE_LIMIT_REQUESTS_PER_SECOND": "0.5",
            "WEPUSH_DATA_DIR": str(tmp_path),
        }
    )
    s3 = config.artifacts.s3
    assert (s3.bucket, s3.access_key_id, s3.secret_access_key, s3.region) == (
        "20261203",
        "0012",
        "123456789",
        "yes",
    )
    assert (config.server.port, config.database.echo) == (19003, True)
    assert (config.security.rate_limit_per_second, config.security.rate_limit_burst) == (0.5, 500)


def test_effective_config_masks_secrets(tmp_path: Path) -> None:
    file = _write(
        tmp_path / "server.yaml",
        "wepush:\n  mode: server\n  database:\n    type: postgresql\n"
        "    url: postgresql+asyncpg://wepush:hunter2-db-password@db.example.com:5432/wepush\n"
        "  artifacts:\n    type: s3\n    s3:\n      bucket: artifacts\n"
        "      secret-access-key: s3-secret-value-123\n",
    )
    config = load_config(file, environ={"WEPUSH_DATA_DIR": str(tmp_path)})
    rendered = render_effective_config(config)
    assert "hunter2-db-password" not in rendered
    assert "s3-secret-value-123" not in rendered
    assert "******" in rendered
    assert "db.example.com" in rendered
    assert "s3-secret-value-123" not in repr(config.artifacts)


def test_listening_beyond_loopback_needs_remote_access(tmp_path: Path) -> None:
    env = {"WEPUSH_DATA_DIR": str(tmp_path)}
    with pytest.raises(ConfigError, match="remote-access"):
        load_config(environ=env, host="0.0.0.0")
    config = load_config(environ={**env, "WEPUSH_SECURITY_REMOTE_ACCESS": "true"}, host="0.0.0.0")
    assert config.server.bind_address == "0.0.0.0"


def test_loopback_targets_are_off_unless_explicitly_enabled_for_tests(tmp_path: Path) -> None:
    env = {"WEPUSH_DATA_DIR": str(tmp_path)}
    assert load_config(environ=env).security.loopback_targets_for_tests is False
    enabled = load_config(environ={**env, "WEPUSH_SECURITY_LOOPBACK_TARGETS_FOR_TESTS": "true"})
    assert enabled.security.loopback_targets_for_tests is True


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        (
            {"WEPUSH_AGENT_EMBEDDED_MAX_RUNS": "98765x"},
            "wepush.agent.embedded.max-runs: must be of type integer, not string",
        ),
        ({"WEPUSH_DATABASE_ECHO": "98765"}, "wepush.database.echo: must be of type boolean, not integer"),
        ({"WEPUSH_LOGGING_FORMAT": "xml-98765"}, 'wepush.logging.format: must be one of "json", "text"'),
        ({"WEPUSH_SERVER_PORT": "98765432"}, "wepush.server.port: must be at most 65535"),
    ],
)
def test_a_configuration_error_names_the_key_and_the_rule_but_never_the_value(
    tmp_path: Path, environ: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(environ={**environ, "WEPUSH_DATA_DIR": str(tmp_path)})

    # The key, and the variable that set it: what the operator has to change.
    [variable] = environ
    assert str(raised.value) == f"environment variable {variable}: {says}"
    assert "98765" not in str(raised.value)


def test_a_secret_of_the_wrong_type_in_the_file_is_not_quoted(tmp_path: Path) -> None:
    file = _write(
        tmp_path / "server.yaml",
        "wepush:\n  artifacts:\n    s3:\n      secret-access-key: [s3-secret-value-123]\n",
    )
    with pytest.raises(ConfigError, match=r"wepush\.artifacts\.s3\.secret-access-key: must be") as raised:
        load_config(file, environ={"WEPUSH_DATA_DIR": str(tmp_path)})

    assert "s3-secret-value-123" not in str(raised.value)


def test_an_unknown_key_is_named_without_its_value(tmp_path: Path) -> None:
    file = _write(tmp_path / "wepush.yaml", "wepush:\n  server:\n    prot: hunter2-value\n")
    with pytest.raises(ConfigError) as raised:
        load_config(file, environ={"WEPUSH_DATA_DIR": str(tmp_path)})

    assert str(raised.value).endswith("wepush.server: unknown key(s) 'prot'")
    assert "hunter2-value" not in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://wepush:pa#ss-Hidden@db.example.com/wepush",
        "postgresql+asyncpg://wepush:p/a?s-Hidden@db.example.com:5432/wepush?ssl=require",
        "postgresql+asyncpg://wepush@db.example.com/wepush?ssl=require&password=pass-Hidden",
    ],
    ids=["hash", "slash-and-question-mark", "query-option"],
)
def test_a_database_password_is_masked_as_sqlalchemy_reads_the_url(tmp_path: Path, url: str) -> None:
    # urlsplit would take "#", "/" or "?" in a password for the start of the fragment, path or query.
    config = load_config(
        environ={
            "WEPUSH_MODE": "server",
            "WEPUSH_DATABASE_TYPE": "postgresql",
            "WEPUSH_DATABASE_URL": url,
            "WEPUSH_DATA_DIR": str(tmp_path),
        }
    )
    rendered = render_effective_config(config)
    assert "Hidden" not in rendered
    assert "db.example.com" in rendered
    assert "******" in rendered


def test_a_field_length_above_what_the_csv_parser_reads_is_refused_at_start(tmp_path: Path) -> None:
    # It used to be accepted and then silently capped at the parser's 131072 characters per field.
    environ = {"WEPUSH_DATA_DIR": str(tmp_path)}
    assert load_config(environ={**environ, "WEPUSH_IMPORTS_MAX_FIELD_LENGTH": "131072"})
    with pytest.raises(ConfigError, match=r"max-field-length.*131072"):
        load_config(environ={**environ, "WEPUSH_IMPORTS_MAX_FIELD_LENGTH": "200000"})


def _server(tmp_path: Path, **env: str) -> dict[str, str]:
    return {
        "WEPUSH_MODE": "server",
        "WEPUSH_DATABASE_TYPE": "postgresql",
        "WEPUSH_DATABASE_URL": "postgresql+asyncpg://wepush@db.internal/wepush",
        "WEPUSH_DATA_DIR": str(tmp_path),
        **env,
    }


def test_each_server_instance_on_a_host_gets_its_own_agent_name(tmp_path: Path) -> None:
    host = socket.gethostname()
    first = load_config(environ=_server(tmp_path, WEPUSH_SERVER_PORT="18991"))
    second = load_config(environ=_server(tmp_path, WEPUSH_SERVER_PORT="18992"))
    standalone = load_config(environ={"WEPUSH_DATA_DIR": str(tmp_path)})

    assert (first.embedded_agent_name, second.embedded_agent_name) == (
        f"embedded@{host}:18991",
        f"embedded@{host}:18992",
    )
    assert standalone.embedded_agent_name == "embedded"


def test_a_configured_agent_name_wins_and_is_validated(tmp_path: Path) -> None:
    named = load_config(environ=_server(tmp_path, WEPUSH_AGENT_EMBEDDED_NAME="eu-west-1a"))
    assert named.embedded_agent_name == "eu-west-1a"
    with pytest.raises(ConfigError, match=r"agent\.embedded\.name"):
        load_config(environ=_server(tmp_path, WEPUSH_AGENT_EMBEDDED_NAME="two words"))
