"""Build a runnable Service from its configuration: adapters, application services, the ASGI app.

Start-up order (the lifespan): open the database (standalone migrates it; server mode only checks the
revision), load or create the master key, make sure the default workspace and the sealed server keys
exist, issue the bootstrap admin token on a first start, then build the application services. Shutdown
undoes it in reverse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from sqlalchemy import inspect, make_url, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.plugins import PluginHealth, PluginStatus
from wepush.server.api.middleware import (
    BodyLimitOverride,
    BodySizeLimitMiddleware,
    ChunkedBodyMiddleware,
    HttpMetricsMiddleware,
    MediaTypeMiddleware,
    ProblemCorsMiddleware,
    RelativeRedirectMiddleware,
    SecurityHeadersMiddleware,
    TraceIdMiddleware,
    cors_middleware_options,
)
from wepush.server.application._deps import ImportLimits, ServiceDeps
from wepush.server.application._services import ApplicationServices, ResourceServices, StartedServices
from wepush.server.application.audit import Auditor
from wepush.server.application.auth import Principal, PrincipalType
from wepush.server.application.authentication import TokenAuthenticator
from wepush.server.application.bootstrap import SystemBootstrap
from wepush.server.application.credentials import TokenHasher
from wepush.server.application.execution import (
    ArtifactRetention,
    ArtifactStore,
    OutcomeArtifactRepair,
    RunAvailabilityNotifier,
    RunRecovery,
)
from wepush.server.application.health import CheckResult, HealthService
from wepush.server.application.import_retention import ImportRetention
from wepush.server.application.imports import AbandonedUploads
from wepush.server.application.metrics import RequestMetrics
from wepush.server.application.paging import CursorCodec
from wepush.server.application.request_budget import RequestBudget
from wepush.server.application.runs import RunPorts
from wepush.server.composition._app import ServiceApp, create_app
from wepush.server.composition._catalog import build_catalog
from wepush.server.config import ServiceConfig
from wepush.server.domain import AuditOutcome, SecretRecord, utc_now
from wepush.server.infra.artifacts import ArtifactStoreUnavailable, LocalArtifactStore, S3ArtifactStore
from wepush.server.infra.db import (
    READ_ONLY_OPTION,
    DatabaseInUse,
    DatabaseLock,
    DatabaseRecoveryLocks,
    PoolSettings,
    SchemaFit,
    SchemaState,
    SqlUnitOfWorkFactory,
    UnknownSchemaRevision,
    create_database,
    head_revision,
    read_stored_figures,
    require_usable,
    schema_state_async,
    schema_state_of,
    sqlite_database_file,
    upgrade_database_async,
)
from wepush.server.infra.events import RunEventBroker, StoredRunEvents
from wepush.server.infra.execution import AgentNameInUse, EmbeddedAgent, EmbeddedAgentSettings
from wepush.server.infra.logging import current_trace_id, get_redactor
from wepush.server.infra.metrics import PrometheusMetrics
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyError, MasterKeyRing

_log = logging.getLogger("wepush.server")
#: How often expired imports and their staging rows are swept (the deadline is 24 hours after creation).
IMPORT_RETENTION_INTERVAL: Final = timedelta(minutes=10)
#: Next to the upload lease (5 minutes): an abandoned upload is failed within about 6 minutes.
ABANDONED_UPLOAD_INTERVAL: Final = timedelta(minutes=1)
ARTIFACT_RETENTION_INTERVAL: Final = timedelta(hours=1)
#: A finished run's outcome files lost while the artifact store could not be written are written again
#: within about this long after the store is back (a pass with nothing lost is one indexed query).
ARTIFACT_REBUILD_INTERVAL: Final = timedelta(minutes=1)
#: A cancel hints the pass at once; the interval covers a cancel stored through another instance.
CANCELLED_RUN_INTERVAL: Final = timedelta(seconds=5)


def _version() -> str:
    try:
        return metadata.version("wepush-next")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def prepare_data_dir(config: ServiceConfig) -> None:
    """Standalone owns its data directory: create it private to the Service user.

    The SQLite file holds recipients' personal data (numbers, addresses), so it is created 0600 before
    SQLite first opens it; SQLite gives its WAL and shared-memory files the database file's mode."""
    config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    config.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(config.data_dir.stat().st_mode)
    if mode & 0o077:
        # An existing directory is the operator's to change; say what is exposed and how to close it.
        _log.warning(
            "data directory %s is open to other users (mode %o) and holds recipients' personal data; "
            "run: chmod 700 %s",
            config.data_dir,
            mode,
            config.data_dir,
            extra={"event": "DATA_DIR_EXPOSED"},
        )
    url = make_url(config.database.url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        database = Path(url.database)
        database.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileExistsError):
            # An empty file is an empty SQLite database.
            os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def load_key_ring(config: ServiceConfig, sealed: Mapping[int, int] | None = None) -> MasterKeyRing:
    """Standalone creates its master key on first start; server mode fails closed without one.

    ``sealed`` (secrets per master key version, as the database holds them) makes it a start-up check:
    a missing standalone key file is only a first start while nothing is sealed yet (a fresh key would
    hide the loss of the old one until the first secret failed to open), and the ring must hold every
    version a secret was sealed with."""
    path = config.secrets.master_key_file
    if config.standalone and config.secrets.master_key_env is None and not path.exists():
        if sealed:
            raise StartupRefused(
                f"master key: the key file {path} is missing, but the database holds "
                f"{sum(sealed.values())} secrets sealed with a master key; restore that file from a "
                "backup (a new key could not open them)"
            )
        return MasterKeyRing.create_standalone(path)
    if config.secrets.master_key_env:
        ring = MasterKeyRing.load_server(environ=os.environ, env_var=config.secrets.master_key_env)
        source = f"the environment variable {config.secrets.master_key_env}"
    else:
        ring = MasterKeyRing.load_server(path)
        source = f"the key file {path}"
    missing = sorted(set(sealed or ()) - set(ring.versions))
    if missing:
        raise StartupRefused(
            "master key: the database holds secrets sealed under master key version "
            f"{', '.join(map(str, missing))}, which {source} does not hold; put those versions back (a "
            "version stays in the ring until 'wepush secrets retire' finds no secret using it)"
        )
    return ring


def reload_key_ring(config: ServiceConfig) -> MasterKeyRing:
    """The ring as its file or variable holds it now, for a running Service adopting a version added
    since it started: never created, and not held to the versions in use at start (one may have been
    retired since)."""
    if config.secrets.master_key_env:
        return MasterKeyRing.load_server(environ=os.environ, env_var=config.secrets.master_key_env)
    return MasterKeyRing.load_server(config.secrets.master_key_file)


async def sealed_key_versions(url: str) -> dict[int, int]:
    """Secrets per master key version in the database at ``url``; none before its first migration."""
    return (await _sealed_secrets(url))[0]


async def _sealed_secrets(url: str) -> tuple[dict[int, int], list[SecretRecord]]:
    """Secrets per master key version, and the oldest secret under each version."""
    engine = create_database(url)
    try:
        async with engine.connect() as connection:
            migrated = await connection.run_sync(lambda sync: inspect(sync).has_table("secret_record"))
        if not migrated:
            return {}, []
        async with SqlUnitOfWorkFactory(engine)(read_only=True) as uow:
            usage = await uow.secret_records.count_by_key_version()
            samples = [await uow.secret_records.first_wrapped_by(version) for version in sorted(usage)]
        return usage, [sample for sample in samples if sample is not None]
    finally:
        await engine.dispose()


def ring_mismatch(config: ServiceConfig, ring: MasterKeyRing, samples: list[SecretRecord]) -> str | None:
    """Why ``ring`` cannot open the database's secrets (``samples``: the oldest under each version), or
    ``None``. Matching version numbers are not enough: a key made anew after the real one was lost carries
    version 1 too, and would let the Service start only for every secret to fail when a run needs it."""
    missing = sorted({s.key_version for s in samples if s.key_version not in ring.versions})
    wrong = sorted(unopened_versions(ring, samples))
    source = (
        f"the environment variable {config.secrets.master_key_env}"
        if config.secrets.master_key_env
        else f"the key file {config.secrets.master_key_file}"
    )
    if missing:
        return (
            f"secrets are sealed under master key version {', '.join(map(str, missing))}, which {source} "
            "does not hold; put back the key file backed up with this database"
        )
    if wrong:
        return (
            f"{source} holds a different key under version {', '.join(map(str, wrong))} than the one the "
            "database's secrets were sealed with (it cannot open them); put back the key file backed up "
            "with this database"
        )
    return None


def unopened_versions(ring: MasterKeyRing, samples: list[SecretRecord]) -> set[int]:
    """The versions ``ring`` holds a key under that does not open the sample sealed under it."""
    return {
        s.key_version
        for s in samples
        if s.key_version in ring.versions and not ring.opens(s.key_version, s.dek_nonce, s.encrypted_dek)
    }


async def oldest_sealed_secrets(url: str) -> list[SecretRecord]:
    """The oldest secret under each master key version the database at ``url`` uses."""
    return (await _sealed_secrets(url))[1]


class StartupRefused(RuntimeError):
    """Something the Service cannot run without is missing or unusable; the message says what."""


def require_migrated_schema(state: SchemaState) -> None:
    """Server mode never migrates (``wepush migrate`` is the one migration job): on a database that job has
    not brought to this release's revision, the start-up's first query would fail on a missing table or
    column, as a traceback. Refuse instead, saying what to run. A schema a newer release's migration job
    moved ahead is served as long as that release declared this one fit for it (a rolling upgrade)."""
    require_usable(state)
    if state.fit in (SchemaFit.NOT_MIGRATED, SchemaFit.BEHIND):
        found = "has never been migrated" if state.revision is None else f"is at revision {state.revision}"
        raise StartupRefused(
            f"database: the schema {found}, and this release needs revision {head_revision()}; run "
            "'wepush migrate' with this release first"
        )


def preflight(config: ServiceConfig) -> None:
    """Check, before the server binds its port, what the Service fails closed on: the master key (against
    the secrets the database holds) and the artifact bucket. A refusal is one clear line for the
    operator, not a start-up traceback."""
    _register_configured_secrets(config)
    if config.standalone:
        # A second `wepush serve` on the same data directory: one line now, rather than a refused start.
        lock = lock_database(config)
        if lock is not None:
            lock.release()
    try:
        # A schema a newer release migrated: standalone's start-up upgrade would fail deep in Alembic, and
        # a server-mode instance would never become ready on it.
        schema = asyncio.run(schema_state_async(config.database.url))
        require_usable(schema)
        sealed, samples = asyncio.run(_sealed_secrets(config.database.url))
    except UnknownSchemaRevision as exc:
        raise StartupRefused(f"database: {exc}") from None
    except (SQLAlchemyError, OSError) as exc:
        cause = getattr(exc, "orig", None) or exc
        # A timeout has no text of its own: name it rather than print nothing.
        reason = (get_redactor().text(str(cause)).splitlines() or [type(cause).__name__])[0]
        raise StartupRefused(f"database: cannot read which master keys its secrets need: {reason}") from None
    try:
        ring = load_key_ring(config, sealed)
    except (MasterKeyError, OSError) as exc:
        raise StartupRefused(f"master key: {exc}") from None
    mismatch = ring_mismatch(config, ring, samples)
    if mismatch:
        raise StartupRefused(f"master key: {mismatch}")
    if not config.standalone:
        require_migrated_schema(schema)
    if config.artifacts.type == "s3":
        try:
            asyncio.run(S3ArtifactStore.from_settings(config.artifacts.s3).check())
        except ArtifactStoreUnavailable as exc:
            raise StartupRefused(f"artifacts: {exc}") from None


#: Below this much free space on a disk the standalone Service writes to, it reports itself unready:
#: writes are about to fail (SQLite answers "database or disk is full", then every write is refused).
MIN_FREE_BYTES: Final = 64 * 1024 * 1024


def disk_short_of_space(directory: Path) -> str | None:
    """What to say when the disk holding ``directory`` has less than :data:`MIN_FREE_BYTES` free."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None  # not there (yet): the writability checks say so
    if free >= MIN_FREE_BYTES:
        return None
    return f"only {free // (1024 * 1024)} MiB free on the disk of {directory}; free some space"


def lock_database(config: ServiceConfig) -> DatabaseLock | None:
    """Standalone's exclusive hold on its SQLite file (``_database_lock.py``); refused while another
    live Service holds it."""
    database = sqlite_database_file(config.database.url)
    if database is None:
        return None
    try:
        return DatabaseLock.acquire(database)
    except DatabaseInUse as exc:
        raise StartupRefused(str(exc)) from None
    except OSError as exc:
        raise StartupRefused(f"cannot lock the database {database}: {exc.strerror}") from None


def write_bootstrap_token(path: Path, token: str) -> None:
    """Write the first admin token to a 0600 file; only the path is ever logged."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Never through a symbolic link: one planted at the path would send the token wherever it points.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise StartupRefused(f"cannot write the bootstrap token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)  # a file that already existed keeps its mode otherwise
        handle.write(token + "\n")


def _register_configured_secrets(config: ServiceConfig) -> None:
    """Secrets that come from the configuration, scrubbed from every log line and error detail from the
    start (a library's debug output or an exception may quote them)."""
    redactor = get_redactor()
    database = make_url(config.database.url)
    # A password may also travel as a connection option, ?password=… (libpq, asyncpg).
    optional = database.query.get("password")
    options = [optional] if isinstance(optional, str) else list(optional or ())
    for value in (config.artifacts.s3.secret_access_key, database.password, *options):
        if value:
            redactor.add_secret_value(str(value))


async def _artifact_store(config: ServiceConfig) -> ArtifactStore:
    """The configured store: a local directory, or a bucket every instance shares (checked now)."""
    if config.artifacts.type == "s3":
        store = S3ArtifactStore.from_settings(config.artifacts.s3)
        await store.check()
        return store
    config.artifacts.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not config.standalone:
        # Valid for one instance, or a directory every instance mounts; with several instances on
        # their own disks, each serves only the artifacts its own runs wrote.
        _log.warning(
            "server mode keeps artifacts in the local directory %s: every instance must share it, or "
            "use an S3-compatible bucket (artifacts.type: s3)",
            config.artifacts.directory,
            extra={"event": "ARTIFACTS_LOCAL_IN_SERVER_MODE"},
        )
    return LocalArtifactStore(config.artifacts.directory)


@dataclass
class ServiceRuntime:
    """The live adapters of one Service process (owned by the lifespan)."""

    config: ServiceConfig
    services: ApplicationServices
    catalog: ProviderCatalog
    plugins: tuple[PluginHealth, ...] = ()
    engine: AsyncEngine | None = None
    uow: SqlUnitOfWorkFactory | None = None
    deps: ServiceDeps | None = None
    bootstrap_token_written: bool = False
    notifier: RunAvailabilityNotifier = field(default_factory=RunAvailabilityNotifier)
    events: RunEventBroker | None = None
    artifact_store: ArtifactStore | None = None
    embedded_agent: EmbeddedAgent | None = None
    secret_store: LocalEnvelopeSecretStore | None = None
    import_retention: asyncio.Task[None] | None = None
    abandoned_uploads: asyncio.Task[None] | None = None
    artifact_retention: asyncio.Task[None] | None = None
    artifact_rebuild: asyncio.Task[None] | None = None
    cancelled_runs: asyncio.Task[None] | None = None
    metrics: PrometheusMetrics | None = None
    database_lock: DatabaseLock | None = None
    on_started: list[Callable[[ServiceRuntime], Any]] = field(default_factory=list)
    #: Why the start was refused, in the one line the operator is shown (``None``: not refused).
    refusal: str | None = None

    def _checks(self) -> None:
        engine = self.engine
        assert engine is not None

        async def database() -> CheckResult:
            async with engine.connect() as connection:
                # A reader: on SQLite a writing connection would queue behind any writer for 30 s.
                connection = await connection.execution_options(**{READ_ONLY_OPTION: True})
                await connection.execute(text("SELECT 1"))
            database_file = sqlite_database_file(self.config.database.url)
            short = None if database_file is None else disk_short_of_space(database_file.parent)
            if short is not None:
                return CheckResult("database", False, f"reachable, but {short}")
            return CheckResult("database", True, "reachable")

        async def migrations() -> CheckResult:
            # Stays ready on a schema a newer release declared fit for this one: the instances of the
            # previous release keep serving while a rolling upgrade replaces them (the ADR's expand step).
            schema = await schema_state_of(engine)
            return CheckResult("migrations", schema.usable, schema.describe())

        async def secrets() -> CheckResult:
            store, uow = self.secret_store, self.uow
            if store is None or uow is None:
                return CheckResult("secrets", False, "master key not loaded")
            async with uow(read_only=True) as unit:
                in_use = await unit.secret_records.count_by_key_version()
                samples = [await unit.secret_records.first_wrapped_by(v) for v in sorted(in_use)]
            try:
                missing = store.lacks(in_use)
                removed = store.missing_from_source(in_use)
            except (MasterKeyError, OSError) as exc:
                return CheckResult("secrets", False, str(exc))
            # A version number is not enough: a copy of another key file may hold another key under it.
            wrong = sorted(unopened_versions(store.key_ring, [s for s in samples if s is not None]))
            if wrong:
                versions = ", ".join(map(str, wrong))
                return CheckResult(
                    "secrets",
                    False,
                    f"this instance's key file holds a different key under master key version {versions}, "
                    "which cannot open the secrets wrapped by it; copy the key file from the host where "
                    "the version was added",
                )
            if removed and not missing:
                versions = ", ".join(map(str, removed))
                return CheckResult(
                    "secrets",
                    False,
                    f"the key file no longer holds master key version {versions}, which secrets of this "
                    "database use (retired from a key file shared with another data directory?); this "
                    "instance opens them only until it stops, and will not start again: put the version "
                    "back into the key file from its backup",
                )
            if missing:
                # Another host rotated, and this one's key file has not been given the new version: every
                # secret wrapped by it fails here (a connection test, a run) until the file is copied.
                versions = ", ".join(map(str, missing))
                return CheckResult(
                    "secrets",
                    False,
                    f"secrets are wrapped by master key version {versions}, which this instance's key file "
                    "does not hold; copy the key file from the host where the version was added",
                )
            return CheckResult("secrets", True, "master key loaded; it opens every key version in use")

        async def artifacts() -> CheckResult:
            if isinstance(self.artifact_store, S3ArtifactStore):
                try:
                    await self.artifact_store.check()
                except ArtifactStoreUnavailable as exc:
                    return CheckResult("artifacts", False, str(exc))
                return CheckResult("artifacts", True, "bucket reachable")
            directory = self.config.artifacts.directory
            if not (directory.is_dir() and os.access(directory, os.W_OK)):
                return CheckResult("artifacts", False, "artifact directory not writable")
            short = disk_short_of_space(directory)
            return CheckResult("artifacts", short is None, short or "writable")

        async def providers() -> CheckResult:
            # A DEGRADED catalog still serves the providers that loaded; the detail says what did not.
            health = self.catalog.health()
            rejected = [f"{p.provider_id or p.source}: {', '.join(p.reasons)}" for p in health.rejected]
            detail = f"{health.state.value}: {len(health.providers) - len(rejected)} active"
            if rejected:
                detail += f"; rejected: {'; '.join(rejected)}"
            return CheckResult("providers", True, detail[:1024])

        for check in (database, migrations, secrets, artifacts, providers):
            self.services.health.add_check(check)

    async def start(self) -> None:
        config = self.config
        if config.standalone:
            prepare_data_dir(config)
            # Before anything touches the database: a second Service on it is refused, not run beside it.
            self.database_lock = lock_database(config)
        try:
            _register_configured_secrets(config)
            # First, so that a bucket the Service cannot use stops it before anything else starts.
            self.artifact_store = await _artifact_store(config)
            # Standalone is its own migration job; server mode runs `wepush migrate` once per release.
            schema = (await upgrade_database_async(config.database.url)).after if config.standalone else None
        except BaseException:
            self._release_database()
            raise
        self.engine = create_database(
            config.database.url, pool=PoolSettings(size=config.database.pool_size), echo=config.database.echo
        )
        self.uow = SqlUnitOfWorkFactory(self.engine)
        self._checks()
        try:
            if schema is None:
                schema = await schema_state_of(self.engine)
                require_migrated_schema(schema)
            if schema.fit is SchemaFit.AHEAD_COMPATIBLE:
                _log.warning(
                    "database schema %s; serving on it until this instance is upgraded",
                    schema.describe(),
                    extra={"event": "SCHEMA_AHEAD_COMPATIBLE"},
                )
            await self._open(self.uow, self.artifact_store)
        except BaseException:
            # A refused start never reaches stop() from the server: release what it opened, pooled
            # database connections first (left to the garbage collector, they warn in whatever runs next).
            await self.stop()
            raise

    async def _open(self, uow_factory: SqlUnitOfWorkFactory, artifacts: ArtifactStore) -> None:
        config = self.config
        async with uow_factory(read_only=True) as uow:
            sealed = await uow.secret_records.count_by_key_version()
        ring = load_key_ring(config, sealed)
        store = LocalEnvelopeSecretStore(ring, reload=lambda: reload_key_ring(config))
        self.secret_store = store
        bootstrap = SystemBootstrap(uow_factory, store, utc_now)
        workspace = await bootstrap.ensure_default_workspace()
        keys = await bootstrap.server_keys(workspace.id)
        hasher = TokenHasher(keys.token_pepper)
        token_file = config.security.bootstrap_token_file
        if await bootstrap.ensure_bootstrap_admin(
            workspace.id, hasher, lambda token: write_bootstrap_token(token_file, token)
        ):
            self.bootstrap_token_written = True
            _log.warning(
                "bootstrap admin token written to %s (mode 0600)",
                config.security.bootstrap_token_file,
                extra={"event": "BOOTSTRAP_TOKEN_WRITTEN"},
            )
        await self._audit_rejected_plugins(workspace.id)
        self.deps = ServiceDeps(
            uow=uow_factory,
            clock=utc_now,
            auditor=Auditor(utc_now, current_trace_id),
            catalog=self.catalog,
            secret_store=store,
            tokens=hasher,
            import_limits=ImportLimits(
                max_bytes=config.imports.max_bytes,
                max_rows=config.imports.max_rows,
                max_columns=config.imports.max_columns,
                max_field_length=config.imports.max_field_length,
            ),
            redactor=get_redactor(),
            instance_name=config.embedded_agent_name,
        )
        self.events = RunEventBroker(
            StoredRunEvents(uow_factory), poll_interval=config.events.progress_interval.total_seconds()
        )
        run_ports = RunPorts(
            confirmation_key=keys.confirmation_key,
            notifier=self.notifier,
            events=self.events,
            artifacts=artifacts,
            sse_heartbeat=config.events.sse_heartbeat,
        )
        engine = self.engine
        if config.metrics.enabled and engine is not None:
            self.metrics = PrometheusMetrics(
                lambda now: read_stored_figures(engine, now),
                utc_now,
                build={"version": _version(), "mode": config.mode, "schema_revision": head_revision()},
            )
        self.services.started = StartedServices(
            metrics=self.metrics,
            auth=TokenAuthenticator(uow_factory, hasher, utc_now, auditor=self.deps.auditor),
            cursors=CursorCodec(keys.cursor_key),
            resources=ResourceServices.build(self.deps, run_ports=run_ports),
            budget=RequestBudget(
                config.security.rate_limit_per_second, config.security.rate_limit_burst, time.monotonic
            ),
        )
        agent = self._embedded_agent(workspace.id, store) if config.agent.embedded_enabled else None
        if agent is not None:
            if self.database_lock is not None:
                # No other process runs on this database: a heartbeat under the name is a crashed
                # predecessor's, whose runs are recovered at once rather than after a lease TTL.
                agent.name_known_free()
            # Before anything done in the instance's name: a live instance holding the same name would
            # lose the uploads it is receiving, and then its runs.
            await agent.ensure_name_free()
        await self.services.started.resources.imports.fail_interrupted_uploads()
        # Every instance sweeps; the sweep's updates and deletes are conditional and idempotent.
        self.import_retention = asyncio.create_task(
            ImportRetention(uow_factory, utc_now).run_every(IMPORT_RETENTION_INTERVAL),
            name="import-retention",
        )
        # Uploads whose receiving instance stopped renewing its lease and never came back.
        self.abandoned_uploads = asyncio.create_task(
            AbandonedUploads(uow_factory, utc_now, self.deps.auditor).run_every(ABANDONED_UPLOAD_INTERVAL),
            name="abandoned-uploads",
        )
        # Expired artifacts and uploads whose writer died: the Service's own duty, so an instance without
        # an embedded agent (or one whose agent failed) still keeps the store clean.
        self.artifact_retention = asyncio.create_task(
            ArtifactRetention(uow_factory, artifacts, utc_now).run_every(ARTIFACT_RETENTION_INTERVAL),
            name="artifact-retention",
        )
        # Outcome files of finished runs lost while the store could not be written, from the stored item
        # results; every instance sweeps, one repairer per run at a time (the run's recovery lock).
        self.artifact_rebuild = asyncio.create_task(
            OutcomeArtifactRepair(
                uow_factory,
                artifacts,
                utc_now,
                locks=DatabaseRecoveryLocks(self.engine) if self.engine is not None else None,
            ).run_every(ARTIFACT_REBUILD_INTERVAL),
            name="artifact-rebuild",
        )
        # Runs cancelled before any agent started them: ended by the Service itself (every recipient UNSENT,
        # then CANCELLED), so a cancel completes on an instance without an embedded agent too.
        finisher = RunRecovery(
            uow=uow_factory,
            artifact_store=artifacts,
            clock=utc_now,
            locks=DatabaseRecoveryLocks(self.engine) if self.engine is not None else None,
        )
        self.cancelled_runs = asyncio.create_task(
            finisher.finish_cancelled_every(CANCELLED_RUN_INTERVAL, self.notifier), name="cancelled-runs"
        )
        if agent is not None:
            self.embedded_agent = agent
            await agent.start()
        for hook in self.on_started:
            await hook(self)

    def _embedded_agent(self, workspace_id: str, secret_store: LocalEnvelopeSecretStore) -> EmbeddedAgent:
        assert self.uow is not None
        assert self.artifact_store is not None
        settings = EmbeddedAgentSettings(
            max_runs=self.config.agent.max_runs,
            max_concurrency=self.config.agent.max_concurrency,
            agent_name=self.config.embedded_agent_name,
        )
        return EmbeddedAgent(
            uow=self.uow,
            providers=self.catalog,
            artifact_store=self.artifact_store,
            secret_store=secret_store,
            notifier=self.notifier,
            workspace_id=workspace_id,
            settings=settings,
            agent_version=_version(),
            redactor=get_redactor(),
            recovery_locks=DatabaseRecoveryLocks(self.engine) if self.engine is not None else None,
            metrics=self.metrics,
        )

    async def _audit_rejected_plugins(self, workspace_id: str) -> None:
        """A rejected plugin is a security-relevant event: it lands in the audit log with its reason."""
        rejected = [p for p in self.plugins if p.status is PluginStatus.REJECTED]
        if not rejected or self.uow is None:
            return
        service = Principal(type=PrincipalType.SYSTEM, id="service")
        auditor = Auditor(utc_now)
        async with self.uow() as uow:
            for plugin in rejected:
                await auditor.record(
                    uow,
                    service,
                    "plugin.rejected",
                    "PLUGIN",
                    workspace_id=workspace_id,
                    resource_id=f"{plugin.plugin_id}@{plugin.version}",
                    outcome=AuditOutcome.DENIED,
                    summary=plugin.reason,
                )

    async def quiesce(self) -> None:
        """The first step of an orderly stop, taken as the server stops listening and before it waits for
        the requests under way: end the open event streams (a client following a run would otherwise hold
        the server for its whole graceful-shutdown timeout, then be cancelled with a traceback) and drain
        the embedded agent (no new runs, up to its grace for the runs it sends, then cancel them). Both
        are idempotent: :meth:`stop` finds them done."""
        if self.events is not None:
            await self.events.stop()
        if self.embedded_agent is not None:
            await self.embedded_agent.shutdown()

    async def stop(self) -> None:
        self.services.started = None
        sweeps = (
            self.import_retention,
            self.abandoned_uploads,
            self.artifact_retention,
            self.artifact_rebuild,
            self.cancelled_runs,
        )
        for sweep in sweeps:
            if sweep is not None:
                sweep.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweep
        self.import_retention = self.abandoned_uploads = self.artifact_retention = None
        self.artifact_rebuild = self.cancelled_runs = None
        if self.embedded_agent is not None:
            # Runs get their grace period to finish, then are cancelled and settled, before the database goes.
            await self.embedded_agent.shutdown()
            self.embedded_agent = None
        if self.events is not None:
            # Ends every open SSE stream, so the server's shutdown never waits on a client.
            await self.events.stop()
            self.events = None
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None
        self._release_database()

    def _release_database(self) -> None:
        if self.database_lock is not None:
            self.database_lock.release()
            self.database_lock = None


def _is_import_upload(path: str) -> bool:
    """The audience import upload streams large CSV files; it alone gets the upload limit."""
    return "/audiences/" in path and "/imports/" in path and path.endswith("/content")


def _wrap(config: ServiceConfig, services: ApplicationServices) -> Callable[[ASGIApp], ASGIApp]:
    def metrics() -> RequestMetrics | None:
        return None if services.started is None else services.started.metrics

    def wrap(app: ASGIApp) -> ASGIApp:
        wrapped: ASGIApp = BodySizeLimitMiddleware(
            MediaTypeMiddleware(ChunkedBodyMiddleware(app)),
            max_bytes=config.server.max_body_bytes,
            overrides=[BodyLimitOverride(_is_import_upload, config.server.max_upload_bytes)],
        )
        cors = cors_middleware_options(config.server.cors_allowed_origins)
        if cors is not None:
            wrapped = ProblemCorsMiddleware(wrapped, **cors)
        wrapped = SecurityHeadersMiddleware(RelativeRedirectMiddleware(wrapped))
        # Outside every refusal (body limit, media type, CORS), so those requests are counted too.
        return TraceIdMiddleware(HttpMetricsMiddleware(wrapped, metrics))

    return wrap


def build_service_app(
    config: ServiceConfig, *, catalog: ProviderCatalog | None = None
) -> tuple[ServiceApp, ServiceRuntime]:
    services = ApplicationServices(health=HealthService(), mode=config.mode, version=_version())
    plugins: tuple[PluginHealth, ...] = ()
    if catalog is None:
        catalog, plugins = build_catalog(config)
    runtime = ServiceRuntime(config, services, catalog, plugins=plugins)

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        try:
            await runtime.start()
        except Exception as exc:
            runtime.refusal = start_refusal(exc)
            raise
        try:
            yield
        finally:
            await runtime.stop()

    middlewares = _wrap(config, services)
    app = create_app(
        services, lifespan=lifespan, wrap=lambda inner: RefusedStartReport(middlewares(inner), runtime)
    )
    return app, runtime


def start_refusal(exc: BaseException) -> str | None:
    """The one line the operator is shown for a start refused on something to fix, or ``None`` for a
    fault, whose traceback is the report. :func:`preflight` finds most causes before the server starts;
    the lifespan meets those preflight cannot see (a live instance holding the embedded agent's name, a
    bootstrap token file that cannot be written) and those that appeared since."""
    if isinstance(exc, StartupRefused | AgentNameInUse):
        return str(exc)
    if isinstance(exc, MasterKeyError):
        return f"master key: {exc}"
    if isinstance(exc, ArtifactStoreUnavailable):
        return f"artifacts: {exc}"
    if isinstance(exc, UnknownSchemaRevision):
        return f"database: {exc}"
    return None


class RefusedStartReport:
    """Tells the server a refused start in its one line, not in the traceback Starlette sends with every
    failed start: uvicorn logs that message as is, so a refusal read as a 40-line crash."""

    def __init__(self, app: ASGIApp, runtime: ServiceRuntime) -> None:
        self._app = app
        self._runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self._app(scope, receive, send)
            return

        async def report(message: Message) -> None:
            refusal = self._runtime.refusal
            if message["type"] == "lifespan.startup.failed" and refusal is not None:
                message = {**message, "message": refusal}
            await send(message)

        await self._app(scope, receive, report)
