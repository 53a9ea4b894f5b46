"""Run the real Service app in-process (lifespan included) behind an httpx client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.composition._service import ServiceRuntime, build_service_app
from wepush.server.config import ServiceConfig, load_config


def standalone_config(tmp_path: Path, **env: str) -> ServiceConfig:
    environ = {"WEPUSH_DATA_DIR": str(tmp_path / "data"), "WEPUSH_CONFIG_DIR": str(tmp_path / "config")}
    environ.update(env)
    return load_config(environ=environ)


@dataclass
class RunningApp:
    client: httpx.AsyncClient
    runtime: ServiceRuntime
    admin_token: str | None

    def admin(self) -> dict[str, str]:
        assert self.admin_token is not None
        return {"Authorization": f"Bearer {self.admin_token}"}


async def _lifespan(
    app: Any, queue_in: asyncio.Queue[dict[str, Any]], queue_out: asyncio.Queue[dict[str, Any]]
) -> None:
    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, queue_in.get, queue_out.put)


@asynccontextmanager
async def running_app(
    config: ServiceConfig, *, catalog: ProviderCatalog | None = None
) -> AsyncIterator[RunningApp]:
    app, runtime = build_service_app(config, catalog=catalog)
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.create_task(_lifespan(app, inbox, outbox))
    await inbox.put({"type": "lifespan.startup"})
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        task.cancel()
        raise RuntimeError(f"startup failed: {started.get('message')}")
    token_file = config.security.bootstrap_token_file
    token = token_file.read_text(encoding="utf-8").strip() if token_file.exists() else None
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://wepush.test"
        ) as client:
            yield RunningApp(client, runtime, token)
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task
