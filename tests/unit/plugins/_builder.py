"""Writes tiny provider plugins into a temporary plugins directory, the way a publisher would ship them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from wepush.agent.providers.plugins import (
    PublisherKeyPair,
    generate_key_pair,
    load_private_key,
    refresh_manifest,
    sign_plugin,
)

FACTORY_SOURCE = '''\
"""An echo provider: every send succeeds and answers with the greeting and the recipient address."""

from __future__ import annotations

from datetime import timedelta

from wepush.agent.providers.spi import (
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    PreviewNotSupported,
    PreviewResult,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    SecretResolver,
    ValidationResult,
    WorkerSessionsNotSupported,
    load_descriptor_from_package,
)

from .greeting import GREETING


class EchoSession:
    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        return ProviderResult.ok("ECHO", response_body=f"{GREETING} {request.recipient.get('address')}")

    async def preview(self, request: ProviderPreviewRequest) -> PreviewResult:
        raise PreviewNotSupported("echo has no preview")

    async def open_worker(self) -> ProviderSession:
        raise WorkerSessionsNotSupported("echo has no worker sessions")

    async def close(self) -> None:
        return None


class EchoProviderFactory:
    def descriptor(self) -> ProviderDescriptor:
        return load_descriptor_from_package(__package__)

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.valid()

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        return ValidationResult.valid()

    async def test_connection(
        self, account: ConfigDocument, secrets: SecretResolver, timeout: timedelta
    ) -> ConnectionTestResult:
        return ConnectionTestResult(ok=True, message="echo is always reachable")

    async def open(self, context: ProviderOpenContext) -> ProviderSession:
        return EchoSession()
'''


def _schema(kind: str, provider_id: str) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:test:{provider_id}:{kind}:1",
        "type": "object",
    }
    if kind == "recipient":
        schema["properties"] = {"address": {"type": "string"}}
        schema["required"] = ["address"]
    return schema


@dataclass
class PluginSpec:
    """What to write; every field has a working default so a test changes only what it is about."""

    plugin_id: str = "acme.echo"
    version: str = "1.0.0"
    provider_id: str = "acme.echo"
    spi_min: str = "1"
    spi_max: str = "1"
    greeting: str = "hello from the plugin"
    schemas: tuple[str, ...] = ("account", "message", "recipient", "ui")
    extra_files: Mapping[str, bytes] = field(default_factory=dict)


def write_plugin_sources(directory: Path, spec: PluginSpec) -> Path:
    """The package files and an unsigned manifest head (no ``files`` yet) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(
        "from ._factory import EchoProviderFactory\n\n"
        f"PROVIDER_FACTORIES = {{{spec.provider_id!r}: EchoProviderFactory}}\n",
        encoding="utf-8",
    )
    (directory / "_factory.py").write_text(FACTORY_SOURCE, encoding="utf-8")
    (directory / "greeting.py").write_text(f"GREETING = {spec.greeting!r}\n", encoding="utf-8")
    (directory / "LICENSE").write_text("Apache-2.0\n", encoding="utf-8")
    descriptor = {
        "providerId": spec.provider_id,
        "displayName": "Echo (plugin)",
        "version": spec.version,
        "spiVersion": "1",
        "category": "testing",
        "capabilities": {"testConnection": True, "responseBody": True},
        "threadSafety": "THREAD_SAFE",
    }
    (directory / "provider.json").write_text(json.dumps(descriptor, indent=2), encoding="utf-8")
    (directory / "schemas").mkdir(exist_ok=True)
    for kind in spec.schemas:
        (directory / "schemas" / f"{kind}.schema.json").write_text(
            json.dumps(_schema(kind, spec.provider_id)), encoding="utf-8"
        )
    for path, data in spec.extra_files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    manifest = {
        "pluginId": spec.plugin_id,
        "version": spec.version,
        "spi": {"min": spec.spi_min, "max": spec.spi_max},
        "providers": [spec.provider_id],
        "publisher": {"name": "Acme Test Publisher", "url": None},
        "files": [],
    }
    (directory / "plugin.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return directory


def private_key(pair: PublisherKeyPair) -> Ed25519PrivateKey:
    return load_private_key(pair.private_pem)


def new_publisher() -> PublisherKeyPair:
    return generate_key_pair()


def install_signed(plugins: Path, spec: PluginSpec, publisher: PublisherKeyPair) -> Path:
    """``plugins/<pluginId>/<version>/`` with a manifest signed by ``publisher``."""
    directory = write_plugin_sources(plugins / spec.plugin_id / spec.version, spec)
    sign_plugin(directory, private_key(publisher))
    return directory


def install_unsigned(plugins: Path, spec: PluginSpec) -> Path:
    """A complete manifest (files and hashes) but no ``plugin.json.sig``."""
    directory = write_plugin_sources(plugins / spec.plugin_id / spec.version, spec)
    refresh_manifest(directory)
    return directory


def flip_one_byte(path: Path, offset: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
