"""Build a runnable Service from its configuration: adapters, application services, the ASGI app."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

from wepush.server.application._services import ApplicationServices
from wepush.server.application.auth import Principal
from wepush.server.application.health import CheckResult, HealthService
from wepush.server.composition._app import ServiceApp, create_app
from wepush.server.config import ServiceConfig


def _version() -> str:
    try:
        return metadata.version("wepush-next")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def _data_dir_check(config: ServiceConfig) -> Any:
    async def data_dir() -> CheckResult:
        writable = config.data_dir.is_dir() and os.access(config.data_dir, os.W_OK)
        return CheckResult("dataDir", writable, "writable" if writable else "not writable")

    return data_dir


def prepare_data_dir(config: ServiceConfig) -> None:
    """Standalone owns its data directory: create it private to the Service user."""
    config.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    config.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)


class _NoCredentials:
    """Accepts no credential until the token store is wired in."""

    async def authenticate_api_token(self, token: str) -> Principal | None:
        return None

    async def authenticate_agent(self, credential: str) -> Principal | None:
        return None

    async def authenticate_enrollment(self, token: str) -> Principal | None:
        return None


def build_service_app(config: ServiceConfig) -> ServiceApp:
    health = HealthService([_data_dir_check(config)])
    services = ApplicationServices(health=health, auth=_NoCredentials(), mode=config.mode, version=_version())

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield

    return create_app(services, lifespan=lifespan)
