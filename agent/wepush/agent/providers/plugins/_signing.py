"""Publisher side: refresh a plugin's file list and sign its manifest.

The publisher writes ``plugin.json`` with ``pluginId``, ``version``, ``spi``,
``providers`` and ``publisher``; :func:`sign_plugin` fills in ``files`` (path,
SHA-256, size of every other file) and ``signature``, then writes the
detached Ed25519 signature over the exact manifest bytes to ``plugin.json.sig``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ._files import PluginFilesError, describe_files
from ._keys import key_id, sign_bytes
from ._manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    ManifestError,
    PluginManifest,
    parse_manifest,
    read_manifest_json,
)

__all__ = ["refresh_manifest", "sign_plugin"]


def _updated_document(directory: Path, signer: Ed25519PrivateKey | None) -> dict[str, Any]:
    path = directory / MANIFEST_NAME
    try:
        document = read_manifest_json(path.read_bytes())
    except FileNotFoundError:
        raise ManifestError(
            f"{path} is missing: write it with pluginId, version, spi, providers and publisher first"
        ) from None
    if not isinstance(document, dict):
        raise ManifestError(f"{path} must hold a JSON object")
    try:
        entries = describe_files(directory)
    except PluginFilesError as exc:
        raise ManifestError(str(exc)) from None
    document["files"] = [asdict(entry) for entry in entries]
    if signer is None:
        document.pop("signature", None)
    else:
        document["signature"] = {"algorithm": "Ed25519", "keyId": key_id(signer.public_key())}
    return document


def _write(directory: Path, document: dict[str, Any]) -> tuple[PluginManifest, bytes]:
    raw = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    # Validate before writing: a publisher must never ship (or sign) a manifest the agent would refuse.
    manifest = parse_manifest(json.loads(raw))
    (directory / MANIFEST_NAME).write_bytes(raw)
    return manifest, raw


def sign_plugin(directory: Path, private_key: Ed25519PrivateKey) -> PluginManifest:
    """Recompute the file list, then sign; rewrites ``plugin.json`` and ``plugin.json.sig``."""
    manifest, raw = _write(directory, _updated_document(directory, private_key))
    (directory / SIGNATURE_NAME).write_text(sign_bytes(private_key, raw), encoding="ascii")
    return manifest


def refresh_manifest(directory: Path) -> PluginManifest:
    """Recompute the file list without signing (developer mode); a stale signature is removed."""
    manifest, _ = _write(directory, _updated_document(directory, None))
    (directory / SIGNATURE_NAME).unlink(missing_ok=True)
    return manifest
