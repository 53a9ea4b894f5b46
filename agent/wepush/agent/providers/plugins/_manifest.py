"""``plugin.json``: parsing, validation against the contract schema, SPI ranges and version order.

The manifest is validated with the same JSON Schema the contracts publish
(``contracts/jsonschema/plugin-manifest.schema.json``, shipped as package data
of ``wepush.generated.resources``), so the agent, the ``wepush plugin`` command
and third-party tooling agree on one definition.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from jsonschema.protocols import Validator
from referencing import Registry, Resource

from wepush.agent.providers.common._schema_rules import Draft202012

__all__ = [
    "MANIFEST_NAME",
    "SIGNATURE_NAME",
    "ManifestError",
    "PluginFileEntry",
    "PluginManifest",
    "SpiRange",
    "manifest_problems",
    "parse_manifest",
    "read_manifest_json",
    "version_key",
]

MANIFEST_NAME = "plugin.json"
SIGNATURE_NAME = "plugin.json.sig"
MANIFEST_SCHEMA_ID = "https://wepush.dev/schemas/plugin-manifest.schema.json"
# A manifest lists files and a few ids; anything larger is not a manifest.
MAX_MANIFEST_BYTES = 1024 * 1024

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$"
)


class ManifestError(ValueError):
    """``plugin.json`` is missing, unreadable or does not match the manifest schema."""


@dataclass(frozen=True, slots=True)
class SpiRange:
    """Inclusive range of Provider SPI major versions a plugin supports."""

    min: str
    max: str

    def accepts(self, spi_version: str) -> bool:
        major = int(spi_version.split(".", 1)[0])
        return int(self.min) <= major <= int(self.max)

    def __str__(self) -> str:
        return self.min if self.min == self.max else f"{self.min}..{self.max}"


@dataclass(frozen=True, slots=True)
class PluginFileEntry:
    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class PluginManifest:
    plugin_id: str
    version: str
    spi: SpiRange
    providers: tuple[str, ...]
    publisher: str
    files: tuple[PluginFileEntry, ...]
    key_id: str | None


@functools.cache
def _validator() -> Validator:
    """The manifest schema with every contract schema registered, so ``common.schema.json`` resolves offline."""
    registry: Registry[Any] = Registry()
    directory = resources.files("wepush.generated.resources").joinpath("jsonschema")
    for entry in directory.iterdir():
        if entry.name.endswith(".schema.json"):
            resource = Resource.from_contents(json.loads(entry.read_text(encoding="utf-8")))
            registry = registry.with_resource(resource.id() or entry.name, resource)
    return Draft202012(registry.contents(MANIFEST_SCHEMA_ID), registry=registry)


def read_manifest_json(raw: bytes) -> Any:
    """Decode the manifest bytes; the bytes themselves are what the signature covers."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{MANIFEST_NAME} is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{MANIFEST_NAME} is not UTF-8: {exc.reason}") from exc
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{MANIFEST_NAME} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc


def manifest_problems(document: Any) -> list[str]:
    """Every schema violation, as ``at <pointer>: <message>``; empty when the document is a manifest."""
    errors = sorted(_validator().iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    return [
        f"at {'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message[:200]}"
        for error in errors
    ]


def parse_manifest(document: Any) -> PluginManifest:
    """A typed manifest from a decoded ``plugin.json``; raises :class:`ManifestError` on any problem."""
    problems = manifest_problems(document)
    if problems:
        raise ManifestError(f"{MANIFEST_NAME} does not match the manifest schema: {'; '.join(problems[:3])}")
    spi: Mapping[str, str] = document["spi"]
    signature = document.get("signature")
    manifest = PluginManifest(
        plugin_id=document["pluginId"],
        version=document["version"],
        spi=SpiRange(spi["min"], spi["max"]),
        providers=tuple(document["providers"]),
        publisher=document["publisher"]["name"],
        files=tuple(PluginFileEntry(f["path"], f["sha256"], f["size"]) for f in document["files"]),
        key_id=None if signature is None else signature["keyId"],
    )
    if int(manifest.spi.min) > int(manifest.spi.max):
        raise ManifestError(f"SPI range {manifest.spi.min}..{manifest.spi.max} is empty")
    paths = [entry.path for entry in manifest.files]
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if repeated:
        raise ManifestError(f"{MANIFEST_NAME} lists {', '.join(repeated)} more than once")
    own = sorted({MANIFEST_NAME, SIGNATURE_NAME} & set(paths))
    if own:
        raise ManifestError(f"{MANIFEST_NAME} must not list {', '.join(own)}: the signature covers it")
    return manifest


def version_key(version: str) -> tuple[tuple[int, int, int], bool, tuple[tuple[int, int | str], ...]] | None:
    """A sort key with semantic-version precedence (release above its pre-releases); None if not SemVer."""
    match = _SEMVER.match(version)
    if match is None:
        return None
    core = (int(match[1]), int(match[2]), int(match[3]))
    if match[4] is None:
        return core, True, ()
    # Numeric identifiers sort below alphanumeric ones (SemVer §11.4.3); the tag keeps the tuple comparable.
    identifiers = tuple((0, int(part)) if part.isdigit() else (1, part) for part in match[4].split("."))
    return core, False, identifiers
