"""The Service's provider catalog: installed entry points (built-ins included), one execution path."""

from __future__ import annotations

import inspect
import logging
from importlib.metadata import entry_points

from wepush.agent.providers.catalog import ENTRY_POINT_GROUP, ProviderCatalog
from wepush.agent.providers.plugins import PluginHealth, PluginLoader, PluginStatus
from wepush.server.config import ServiceConfig

_log = logging.getLogger("wepush.server")
_LOOPBACK_OPTION = "allow_loopback_for_tests"


def build_catalog(config: ServiceConfig) -> tuple[ProviderCatalog, tuple[PluginHealth, ...]]:
    """Installed providers (entry points, built-ins included), then the verified plugin directory.

    A rejected plugin leaves the catalog DEGRADED and the other providers working."""
    catalog = _installed_providers(config)
    loader = PluginLoader(
        config.plugins.directory,
        trusted_keys=config.plugins.trusted_keys,
        developer_mode=config.plugins.developer_mode,
    )
    plugins = loader.load_into(catalog)
    for plugin in plugins:
        if plugin.status is PluginStatus.REJECTED:
            _log.warning(
                "plugin %s@%s rejected: %s",
                plugin.plugin_id,
                plugin.version,
                plugin.reason,
                extra={"event": "PLUGIN_REJECTED"},
            )
    return catalog, plugins


def _installed_providers(config: ServiceConfig) -> ProviderCatalog:
    """With ``security.loopback-targets-for-tests`` (tests and local development only) each provider
    that supports it is built with its explicit loopback test setting."""
    if not config.security.loopback_targets_for_tests:
        return ProviderCatalog.from_entry_points()
    _log.warning(
        "security.loopback-targets-for-tests is ON: providers may send to loopback addresses",
        extra={"event": "LOOPBACK_TARGETS_ALLOWED"},
    )
    catalog = ProviderCatalog()
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            target = point.load()
            accepts = _LOOPBACK_OPTION in inspect.signature(target).parameters
            factory = target(**{_LOOPBACK_OPTION: True}) if accepts else target()
        except Exception as exc:  # one broken provider must not stop the others
            catalog.reject(f"entry point {point.name}", f"could not be loaded: {exc.__class__.__name__}")
            continue
        catalog.add(
            factory, source=f"entry point {point.name} (loopback targets for tests)", expected_id=point.name
        )
    return catalog
