"""Signed provider plugins: ``plugins/<pluginId>/<version>/`` verified, then loaded into the catalog.

A plugin is a Python package with a manifest (``plugin.json``: id, version,
SPI range, provider ids, every file with its SHA-256 and size) and a detached
Ed25519 signature over the manifest bytes (``plugin.json.sig``). The signature
proves integrity and provenance; it is NOT a sandbox: a loaded plugin runs in
the agent's process with the agent's rights.
"""

from __future__ import annotations

from ._importer import PLUGIN_MODULE_ROOT
from ._keys import (
    PublisherKeyError,
    PublisherKeyPair,
    TrustedKeys,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
    public_key_text,
)
from ._loader import ACTIVE_FILE, PluginHealth, PluginLoader, PluginStatus, RejectedHook
from ._manifest import MANIFEST_NAME, SIGNATURE_NAME, ManifestError, PluginManifest, SpiRange
from ._signing import refresh_manifest, sign_plugin

__all__ = [
    "ACTIVE_FILE",
    "MANIFEST_NAME",
    "PLUGIN_MODULE_ROOT",
    "SIGNATURE_NAME",
    "ManifestError",
    "PluginHealth",
    "PluginLoader",
    "PluginManifest",
    "PluginStatus",
    "PublisherKeyError",
    "PublisherKeyPair",
    "RejectedHook",
    "SpiRange",
    "TrustedKeys",
    "generate_key_pair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "public_key_text",
    "refresh_manifest",
    "sign_plugin",
]
