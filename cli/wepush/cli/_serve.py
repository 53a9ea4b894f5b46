"""``wepush serve``: load the configuration, print it masked, start the Service on uvicorn."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import uvicorn

from wepush.server.api._http_protocol import ProblemHttpToolsProtocol
from wepush.server.composition._heap import settle_heap
from wepush.server.composition._service import (
    ServiceRuntime,
    StartupRefused,
    build_service_app,
    preflight,
    prepare_data_dir,
)
from wepush.server.config import ConfigError, load_config, render_effective_config
from wepush.server.infra.logging import configure_logging

#: Something the Service needs (the master key, the artifact bucket) is missing or unusable.
EXIT_UNAVAILABLE = 3


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, runtime: ServiceRuntime | None = None) -> None:
        super().__init__(config)
        self._runtime = runtime

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # Started (the lifespan has built the runtime): what exists now lives as long as the process.
        settle_heap()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Before uvicorn waits for the requests under way (and cancels those still running after
        # ``timeout_graceful_shutdown``): an upload streaming from a slow client would otherwise only
        # end by that cancellation. The lifespan's own shutdown comes after that wait, too late for it.
        runtime = self._runtime
        if runtime is None:
            await super().shutdown(sockets)
            return
        started = runtime.services.started
        if started is not None:
            started.resources.imports.stop_uploads()
        # Event streams end now, and the embedded agent drains while uvicorn stops listening and waits
        # for the requests under way: a stop takes the agent's grace, not that plus uvicorn's timeout.
        draining = asyncio.create_task(runtime.quiesce(), name="quiesce")
        try:
            await super().shutdown(sockets)
        finally:
            await draining


def serve(*, config_file: Path | None, host: str | None, port: int | None, data_dir: Path | None) -> int:
    try:
        config = load_config(config_file, host=host, port=port, data_dir=data_dir)
    except ConfigError as exc:
        sys.stderr.write(f"wepush serve: configuration error: {exc}\n")
        return 2
    # Every log line, uvicorn's included, goes through the one redacting handler.
    configure_logging(config.logging.level, config.logging.format, service="wepush-server")
    if config.standalone:
        try:
            prepare_data_dir(config)
        except OSError as exc:
            # A data directory path that is a file, or one this user may not create: say which.
            where = f": {exc.filename}" if exc.filename else ""
            sys.stderr.write(
                f"wepush serve: cannot start: cannot prepare the data directory "
                f"({exc.strerror or type(exc).__name__}{where})\n"
            )
            return EXIT_UNAVAILABLE
    sys.stderr.write("wepush serve: effective configuration\n" + render_effective_config(config))
    sys.stderr.flush()
    try:
        preflight(config)
    except StartupRefused as exc:
        sys.stderr.write(f"wepush serve: cannot start: {exc}\n")
        return EXIT_UNAVAILABLE
    app, runtime = build_service_app(config)
    server = _Server(
        uvicorn.Config(
            app,
            host=config.server.bind_address,
            port=config.server.port,
            log_config=None,
            log_level=config.logging.level.lower(),
            proxy_headers=False,
            server_header=False,
            lifespan="on",
            # httptools, as uvicorn picks it, but a request it cannot parse gets a problem+json 400.
            http=ProblemHttpToolsProtocol,
            # Open SSE streams must not hold a shutdown hostage; the lifespan then ends them.
            timeout_graceful_shutdown=10,
        ),
        runtime,
    )
    try:
        server.run()
    except SystemExit:
        # uvicorn exits (3) when the lifespan's start fails; a refusal there is said as preflight's are.
        if runtime.refusal is None:
            raise
    if runtime.refusal is not None:
        sys.stderr.write(f"wepush serve: cannot start: {runtime.refusal}\n")
        return EXIT_UNAVAILABLE
    return 0 if server.started else 1
