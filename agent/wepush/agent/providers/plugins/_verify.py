"""The static checks of one plugin version, in the order that keeps unverified bytes from mattering.

Signature first (over the exact manifest bytes), then the manifest schema,
then the files the manifest lists, then the SPI range. Nothing here imports
plugin code; :mod:`._loader` does that only for a plugin that passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._files import PluginFiles, PluginFilesError, read_verified_files
from ._keys import TrustedKeys
from ._manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    ManifestError,
    PluginManifest,
    parse_manifest,
    read_manifest_json,
)

__all__ = ["PluginRejected", "VerifiedPlugin", "verify_plugin"]


class PluginRejected(Exception):
    """A plugin version that must not load; ``reason`` is what health output and the audit log show."""

    def __init__(
        self,
        reason: str,
        *,
        plugin_id: str | None = None,
        version: str | None = None,
        providers: tuple[str, ...] = (),
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.plugin_id = plugin_id
        self.version = version
        self.providers = providers


@dataclass(frozen=True, slots=True)
class VerifiedPlugin:
    manifest: PluginManifest
    manifest_bytes: bytes
    files: PluginFiles
    #: Id of the trusted key that signed the manifest; None for an unsigned plugin (developer mode).
    key_id: str | None

    @property
    def signed(self) -> bool:
        return self.key_id is not None


@dataclass(frozen=True, slots=True)
class _Declared:
    """What the (not yet validated) manifest claims, so a rejection can name the plugin and its providers."""

    plugin_id: str | None
    version: str | None
    key_id: str | None
    providers: tuple[str, ...]

    @classmethod
    def of(cls, document: Any) -> _Declared:
        if not isinstance(document, dict):
            return cls(None, None, None, ())
        signature = document.get("signature")
        providers = document.get("providers")
        return cls(
            _text(document.get("pluginId")),
            _text(document.get("version")),
            _text(signature.get("keyId")) if isinstance(signature, dict) else None,
            tuple(p for p in providers if isinstance(p, str)) if isinstance(providers, list) else (),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def verify_plugin(
    directory: Path,
    *,
    trusted_keys: TrustedKeys,
    developer_mode: bool,
    spi_version: str,
    expected: tuple[str, str] | None = None,
) -> VerifiedPlugin:
    """Check ``directory`` (one ``<version>`` directory); raise :class:`PluginRejected` with the reason.

    ``expected`` is ``(plugin id, version)`` taken from the directory names under the plugins root;
    the manifest must agree with them.
    """
    try:
        manifest_bytes = (directory / MANIFEST_NAME).read_bytes()
    except FileNotFoundError:
        raise PluginRejected(f"{MANIFEST_NAME} is missing") from None
    except OSError as exc:
        raise PluginRejected(f"{MANIFEST_NAME} cannot be read ({exc.strerror or exc})") from None
    try:
        document = read_manifest_json(manifest_bytes)
    except ManifestError as exc:
        raise PluginRejected(str(exc)) from None
    declared = _Declared.of(document)

    def rejected(reason: str) -> PluginRejected:
        return PluginRejected(
            reason, plugin_id=declared.plugin_id, version=declared.version, providers=declared.providers
        )

    signature_path = directory / SIGNATURE_NAME
    key_id: str | None = None
    if signature_path.is_file():
        check = trusted_keys.verify(manifest_bytes, signature_path.read_bytes(), declared.key_id)
        if check.problem is not None:
            raise rejected(check.problem)
        key_id = check.key_id
    elif not developer_mode:
        raise rejected(
            f"unsigned plugin: there is no {SIGNATURE_NAME}; unsigned plugins load only in developer mode"
        )

    try:
        manifest = parse_manifest(document)
    except ManifestError as exc:
        raise rejected(str(exc)) from None
    if expected is not None and (manifest.plugin_id, manifest.version) != expected:
        raise rejected(
            f"{MANIFEST_NAME} describes {manifest.plugin_id}@{manifest.version} but lives in "
            f"{expected[0]}/{expected[1]}/"
        )
    try:
        files = read_verified_files(directory, manifest)
    except PluginFilesError as exc:
        raise rejected(str(exc)) from None
    if not manifest.spi.accepts(spi_version):
        raise rejected(
            f"incompatible SPI: the plugin supports Provider SPI {manifest.spi}, this agent implements {spi_version}"
        )
    return VerifiedPlugin(manifest, manifest_bytes, files, key_id)
