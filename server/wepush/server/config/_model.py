"""Typed view of the validated configuration document (kebab-case keys become snake_case fields)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import make_url

from wepush.server.config._durations import parse_duration


@dataclass(frozen=True, slots=True)
class ServerSettings:
    bind_address: str
    port: int
    grpc_port: int
    public_base_url: str
    max_body_bytes: int
    max_upload_bytes: int
    cors_allowed_origins: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    type: Literal["sqlite", "postgresql"]
    url: str
    pool_size: int
    echo: bool


@dataclass(frozen=True, slots=True)
class S3Settings:
    endpoint_url: str | None
    bucket: str | None
    region: str | None
    access_key_id: str | None
    secret_access_key: str | None = field(repr=False)
    presign_ttl: timedelta


@dataclass(frozen=True, slots=True)
class ArtifactSettings:
    type: Literal["local", "s3"]
    directory: Path
    s3: S3Settings


@dataclass(frozen=True, slots=True)
class SecretSettings:
    type: str
    master_key_file: Path
    master_key_env: str | None


@dataclass(frozen=True, slots=True)
class AgentSettings:
    embedded_enabled: bool
    max_runs: int
    max_concurrency: int
    name: str | None = None
    """The configured agent name; ``None`` lets the Service derive one per process."""


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    remote_access: bool
    bootstrap_token_file: Path
    #: Test and local development only: lets channel providers reach loopback mock servers.
    loopback_targets_for_tests: bool
    #: REST API requests each token earns per second (0: no budget) and may make at once.
    rate_limit_per_second: float = 100
    rate_limit_burst: int = 500


@dataclass(frozen=True, slots=True)
class EventSettings:
    progress_interval: timedelta
    batch_size: int
    sse_heartbeat: timedelta


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    level: str
    format: Literal["json", "text"]


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    enabled: bool


@dataclass(frozen=True, slots=True)
class PluginSettings:
    directory: Path
    trusted_keys: tuple[str, ...]
    developer_mode: bool


@dataclass(frozen=True, slots=True)
class ImportSettings:
    max_bytes: int
    max_rows: int
    max_columns: int
    max_field_length: int


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The effective configuration of one Service process."""

    mode: Literal["standalone", "server"]
    data_dir: Path
    config_dir: Path
    server: ServerSettings
    database: DatabaseSettings
    artifacts: ArtifactSettings
    secrets: SecretSettings
    agent: AgentSettings
    security: SecuritySettings
    events: EventSettings
    logging: LoggingSettings
    plugins: PluginSettings
    imports: ImportSettings
    metrics: MetricsSettings
    document: dict[str, Any] = field(repr=False, compare=False)

    @property
    def standalone(self) -> bool:
        return self.mode == "standalone"

    @property
    def embedded_agent_name(self) -> str:
        """The name this process's embedded agent registers under.

        A restart must find its own leases again, so the name is stable for one instance; two live
        instances must never share one (a start under a name whose agent still reports heartbeats is
        refused, rather than recovering, and so revoking, the live one's leases). In server mode several
        instances may share a host, and only their ports tell them apart there.
        """
        if self.agent.name is not None:
            return self.agent.name
        if self.standalone:
            return "embedded"
        return f"embedded@{socket.gethostname()}:{self.server.port}"


def _opt(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def build_config(document: dict[str, Any], data_dir: Path, config_dir: Path) -> ServiceConfig:
    """Map the validated, defaulted document onto typed settings."""
    root = document["wepush"]
    server = root["server"]
    database = root["database"]
    artifacts = root["artifacts"]
    s3 = artifacts.get("s3", {})
    secrets = root["secrets"]
    embedded = root["agent"]["embedded"]
    security = root["security"]
    events = root["events"]
    logging_ = root["logging"]
    plugins = root["plugins"]
    imports = root["imports"]
    port = int(server["port"])
    public = server.get("public-base-url") or f"http://{server['bind-address']}:{port}"
    db_url = database.get("url") or f"sqlite+aiosqlite:///{data_dir / 'wepush-next.db'}"
    # The URL decides (load_config refused the one contradiction a user can state).
    db_type: Literal["sqlite", "postgresql"] = (
        "postgresql" if make_url(db_url).get_backend_name() == "postgresql" else "sqlite"
    )
    return ServiceConfig(
        mode=root["mode"],
        data_dir=data_dir,
        config_dir=config_dir,
        server=ServerSettings(
            bind_address=server["bind-address"],
            port=port,
            grpc_port=int(server["grpc-port"]),
            public_base_url=public.rstrip("/"),
            max_body_bytes=int(server["max-body-bytes"]),
            max_upload_bytes=int(server["max-upload-bytes"]),
            cors_allowed_origins=tuple(server["cors-allowed-origins"]),
        ),
        database=DatabaseSettings(
            type=db_type, url=db_url, pool_size=int(database["pool-size"]), echo=bool(database["echo"])
        ),
        artifacts=ArtifactSettings(
            type=artifacts["type"],
            directory=Path(artifacts.get("directory") or data_dir / "artifacts"),
            s3=S3Settings(
                endpoint_url=_opt(s3.get("endpoint-url")),
                bucket=_opt(s3.get("bucket")),
                region=_opt(s3.get("region")),
                access_key_id=_opt(s3.get("access-key-id")),
                secret_access_key=_opt(s3.get("secret-access-key")),
                presign_ttl=parse_duration(s3.get("presign-ttl", "PT15M")),
            ),
        ),
        secrets=SecretSettings(
            type=secrets["type"],
            master_key_file=Path(secrets.get("master-key-file") or config_dir / "master.key"),
            master_key_env=_opt(secrets.get("master-key-env")),
        ),
        agent=AgentSettings(
            embedded_enabled=bool(embedded["enabled"]),
            max_runs=int(embedded["max-runs"]),
            max_concurrency=int(embedded["max-concurrency"]),
            name=_opt(embedded.get("name")),
        ),
        security=SecuritySettings(
            remote_access=bool(security["remote-access"]),
            bootstrap_token_file=Path(
                security.get("bootstrap-token-file") or data_dir / "bootstrap-admin.token"
            ),
            loopback_targets_for_tests=bool(security.get("loopback-targets-for-tests", False)),
            rate_limit_per_second=float(security["rate-limit"]["requests-per-second"]),
            rate_limit_burst=int(security["rate-limit"]["burst"]),
        ),
        events=EventSettings(
            progress_interval=parse_duration(events["progress-interval"]),
            batch_size=int(events["batch-size"]),
            sse_heartbeat=parse_duration(events["sse-heartbeat"]),
        ),
        logging=LoggingSettings(level=logging_["level"], format=logging_["format"]),
        metrics=MetricsSettings(enabled=bool(root["metrics"]["enabled"])),
        plugins=PluginSettings(
            directory=Path(plugins.get("directory") or data_dir / "plugins"),
            trusted_keys=tuple(plugins["trusted-keys"]),
            developer_mode=bool(plugins["developer-mode"]),
        ),
        imports=ImportSettings(
            max_bytes=int(imports["max-bytes"]),
            max_rows=int(imports["max-rows"]),
            max_columns=int(imports["max-columns"]),
            max_field_length=int(imports["max-field-length"]),
        ),
        document=document,
    )
