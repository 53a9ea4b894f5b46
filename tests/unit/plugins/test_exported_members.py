"""The plugin package's public surface is deliberate: adding or dropping a name is a decision."""

from __future__ import annotations

import wepush.agent.providers.plugins as plugins

EXPECTED = {
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
}


def test_plugins_package_exports_exactly_its_curated_names() -> None:
    assert set(plugins.__all__) == EXPECTED
    assert all(hasattr(plugins, name) for name in EXPECTED)
