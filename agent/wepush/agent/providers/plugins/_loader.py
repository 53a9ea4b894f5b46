"""``PluginLoader``: signed provider plugins from ``plugins/<pluginId>/<version>/`` into the catalog.

Which version is active: the version named in ``plugins/<pluginId>/active``
(one line) when that file exists; otherwise the highest release by semantic
version precedence, or the highest pre-release when no release is installed.
Other versions stay on disk untouched (staged updates, rollback).

A plugin's root ``__init__.py`` exposes ``PROVIDER_FACTORIES``: a mapping of
provider id to a factory class (constructed without arguments) or a factory
object — the same rule as an entry point. Its keys must be exactly the
manifest's ``providers``.

A plugin is registered all or nothing: every provider it declares passes the
catalog's checks (descriptor, schemas, no duplicate id) before any of them is
added. A refused plugin is REJECTED with its reason in :meth:`PluginLoader.health`,
in the catalog (which turns DEGRADED), in the log and through ``on_rejected``;
loading carries on with the next plugin.
"""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from wepush.agent.providers.catalog import (
    PROVIDER_ID_PATTERN,
    ProviderCatalog,
    ProviderStatus,
    descriptor_problems,
)
from wepush.agent.providers.spi import SPI_VERSION, ProviderDescriptor, ProviderFactory, redact_diagnostic

from ._importer import import_plugin, module_name_for, unload_plugin
from ._keys import TrustedKeys
from ._manifest import version_key
from ._verify import PluginRejected, VerifiedPlugin, verify_plugin

__all__ = ["ACTIVE_FILE", "PluginHealth", "PluginLoader", "PluginStatus", "RejectedHook"]

ACTIVE_FILE = "active"
FACTORIES_ATTRIBUTE = "PROVIDER_FACTORIES"
_FACTORY_METHODS = ("descriptor", "validate_account", "validate_message", "test_connection", "open")

_log = logging.getLogger("wepush.agent.providers.plugins")

#: ``on_rejected(plugin_id, version, reason)``; the Service wires it to its audit log.
RejectedHook = Callable[[str, str | None, str], None]


class PluginStatus(enum.StrEnum):
    ACTIVE = "ACTIVE"
    #: Loaded without a signature because developer mode is on; never in production.
    LOADED_UNSIGNED = "LOADED_UNSIGNED"
    REJECTED = "REJECTED"


@dataclass(frozen=True, slots=True)
class PluginHealth:
    """One plugin's active version: whether it loaded, who signed it, and why not."""

    plugin_id: str
    version: str | None
    status: PluginStatus
    reason: str | None = None
    providers: tuple[str, ...] = ()
    key_id: str | None = None
    other_versions: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"plugin:{self.plugin_id}" + (f"@{self.version}" if self.version else "")


def _diagnostic(prefix: str, exc: BaseException) -> str:
    # Plugin errors may quote configuration or paths; keep them short and redacted like the catalog does.
    return redact_diagnostic(f"{prefix}: {type(exc).__name__}: {exc}", limit=300) or prefix


def _unreadable(exc: OSError) -> PluginRejected:
    where = Path(str(exc.filename)).name if exc.filename else "the plugin directory"
    return PluginRejected(f"{where} cannot be read ({exc.strerror or exc})")


def _choose_version(plugin_dir: Path) -> tuple[str, tuple[str, ...]]:
    """The active version directory name and the other installed versions."""
    installed = sorted(
        (child.name for child in plugin_dir.iterdir() if child.is_dir() and version_key(child.name)),
        key=lambda name: version_key(name) or ((0, 0, 0), False, ()),
    )
    pinned = plugin_dir / ACTIVE_FILE
    if pinned.is_file():
        wanted = pinned.read_text(encoding="utf-8").strip()
        if wanted not in installed:
            raise PluginRejected(f"{ACTIVE_FILE} names version {wanted!r}, which is not installed")
        return wanted, tuple(v for v in installed if v != wanted)
    if not installed:
        raise PluginRejected("no version directory (plugins/<pluginId>/<version>/) is installed")
    releases = [v for v in installed if "-" not in v.split("+", 1)[0]]
    chosen = (releases or installed)[-1]
    return chosen, tuple(v for v in installed if v != chosen)


class PluginLoader:
    """Verifies and loads the plugins under ``directory`` into a :class:`ProviderCatalog`.

    ``trusted_keys`` are publisher public keys (base64 of the raw 32 bytes, or PEM); an unreadable key
    raises :class:`PublisherKeyError` here, because it is a configuration error. The signature proves
    who published a plugin and that it is unchanged; it is not a sandbox.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        trusted_keys: Iterable[str] = (),
        developer_mode: bool = False,
        spi_version: str = SPI_VERSION,
        on_rejected: RejectedHook | None = None,
    ) -> None:
        self._directory = Path(directory)
        self._trusted = TrustedKeys(trusted_keys)
        self._developer_mode = developer_mode
        self._spi_version = spi_version
        self._on_rejected = on_rejected
        self._health: list[PluginHealth] = []

    @property
    def developer_mode(self) -> bool:
        return self._developer_mode

    def health(self) -> tuple[PluginHealth, ...]:
        return tuple(self._health)

    def load_into(self, catalog: ProviderCatalog) -> tuple[PluginHealth, ...]:
        """Load the active version of every plugin; a missing plugins directory means no plugins."""
        if not self._directory.is_dir():
            return ()
        results = []
        for plugin_dir in sorted(self._directory.iterdir(), key=lambda p: p.name):
            # Hidden entries hold staging areas and editor litter; plain files are not plugins.
            if plugin_dir.name.startswith(".") or not plugin_dir.is_dir():
                continue
            results.append(self._load_plugin(plugin_dir, catalog))
        return tuple(results)

    def load_version(
        self, directory: Path, catalog: ProviderCatalog, *, expected: tuple[str, str] | None = None
    ) -> PluginHealth:
        """Verify and load one ``<version>`` directory (``wepush plugin verify`` uses this directly)."""
        return self._load(directory, catalog, expected=expected, other_versions=())

    def _load_plugin(self, plugin_dir: Path, catalog: ProviderCatalog) -> PluginHealth:
        plugin_id = plugin_dir.name
        if not PROVIDER_ID_PATTERN.match(plugin_id):
            return self._reject(
                catalog, plugin_id, None, PluginRejected(f"directory name {plugin_id!r} is not a plugin id")
            )
        try:
            version, others = _choose_version(plugin_dir)
        except PluginRejected as exc:
            return self._reject(catalog, plugin_id, None, exc)
        except OSError as exc:
            return self._reject(catalog, plugin_id, None, _unreadable(exc))
        return self._load(plugin_dir / version, catalog, expected=(plugin_id, version), other_versions=others)

    def _load(
        self,
        directory: Path,
        catalog: ProviderCatalog,
        *,
        expected: tuple[str, str] | None,
        other_versions: tuple[str, ...],
    ) -> PluginHealth:
        fallback_id = expected[0] if expected else directory.name
        fallback_version = expected[1] if expected else None
        try:
            verified = verify_plugin(
                directory,
                trusted_keys=self._trusted,
                developer_mode=self._developer_mode,
                spi_version=self._spi_version,
                expected=expected,
            )
        except OSError as exc:
            return self._reject(catalog, fallback_id, fallback_version, _unreadable(exc), other_versions)
        except PluginRejected as exc:
            # Under the plugins root the directory names are authoritative; for a loose directory, the manifest.
            plugin_id = fallback_id if expected else exc.plugin_id or fallback_id
            version = fallback_version if expected else exc.version
            return self._reject(catalog, plugin_id, version, exc, other_versions)
        manifest = verified.manifest
        try:
            self._register(verified, catalog)
        except PluginRejected as exc:
            exc.providers = exc.providers or manifest.providers
            return self._reject(catalog, manifest.plugin_id, manifest.version, exc, other_versions)
        if verified.signed:
            status, reason = PluginStatus.ACTIVE, None
        else:
            status = PluginStatus.LOADED_UNSIGNED
            reason = (
                "unsigned: loaded only because developer mode is on; never use developer mode in production"
            )
            _log.warning(
                "plugin %s@%s is %s: %s",
                manifest.plugin_id,
                manifest.version,
                status,
                reason,
                extra={"event": "PLUGIN_LOADED_UNSIGNED"},
            )
        return self._record(
            PluginHealth(
                manifest.plugin_id,
                manifest.version,
                status,
                reason,
                manifest.providers,
                verified.key_id,
                other_versions,
            )
        )

    def _register(self, verified: VerifiedPlugin, catalog: ProviderCatalog) -> None:
        manifest = verified.manifest
        package = module_name_for(manifest.plugin_id, manifest.version, verified.manifest_bytes)
        try:
            module = import_plugin(package, verified.files)
        except (Exception, SystemExit) as exc:
            # A plugin that calls sys.exit() while importing is refused, not allowed to stop the agent.
            raise PluginRejected(_diagnostic("the plugin package cannot be imported", exc)) from None
        try:
            factories = self._factories(module.__dict__.get(FACTORIES_ATTRIBUTE), manifest.providers)
            self._check_against(catalog, factories)
        except PluginRejected:
            unload_plugin(package)
            raise
        source = f"plugin:{manifest.plugin_id}@{manifest.version}"
        if not verified.signed:
            source += " [unsigned, developer mode]"
        refused = [
            health
            for provider_id, (factory, _) in factories.items()
            if (health := catalog.add(factory, source=source, expected_id=provider_id)).status
            is ProviderStatus.REJECTED
        ]
        if refused:
            # The checks above mirror the catalog's, so this means the catalog changed underneath us.
            raise PluginRejected("; ".join(reason for health in refused for reason in health.reasons))

    def _factories(
        self, declared: object, manifest_providers: tuple[str, ...]
    ) -> dict[str, tuple[ProviderFactory, ProviderDescriptor]]:
        if not isinstance(declared, Mapping):
            raise PluginRejected(
                f"the plugin package defines no {FACTORIES_ATTRIBUTE} mapping of provider id to factory"
            )
        if set(declared) != set(manifest_providers):
            raise PluginRejected(
                f"the manifest declares providers {sorted(manifest_providers)} but the package provides "
                f"{sorted(str(k) for k in declared)}"
            )
        built: dict[str, tuple[ProviderFactory, ProviderDescriptor]] = {}
        for provider_id in manifest_providers:
            entry = declared[provider_id]
            try:
                factory = entry() if inspect.isclass(entry) else entry
            except Exception as exc:
                raise PluginRejected(
                    _diagnostic(f"provider {provider_id}: factory cannot be constructed", exc)
                ) from None
            missing = [name for name in _FACTORY_METHODS if not callable(getattr(factory, name, None))]
            if missing:
                raise PluginRejected(
                    f"provider {provider_id}: not a ProviderFactory: missing {', '.join(missing)}"
                )
            # The structural check above stands in for isinstance: the SPI Protocol is not runtime-checkable.
            typed: ProviderFactory = factory  # type: ignore[assignment]
            try:
                descriptor = typed.descriptor()
            except Exception as exc:
                raise PluginRejected(
                    _diagnostic(f"provider {provider_id}: descriptor cannot be loaded", exc)
                ) from None
            if not isinstance(descriptor, ProviderDescriptor):
                raise PluginRejected(
                    f"provider {provider_id}: descriptor() did not return a ProviderDescriptor"
                )
            built[provider_id] = (typed, descriptor)
        return built

    def _check_against(
        self, catalog: ProviderCatalog, factories: Mapping[str, tuple[ProviderFactory, ProviderDescriptor]]
    ) -> None:
        problems: list[str] = []
        owners = {
            h.provider_id: h.source for h in catalog.health().providers if h.status is ProviderStatus.ACTIVE
        }
        for provider_id, (_, descriptor) in factories.items():
            found = descriptor_problems(descriptor)
            if descriptor.provider_id != provider_id:
                found.append(
                    f"registered as {provider_id!r} but the descriptor says {descriptor.provider_id!r}"
                )
            if provider_id in catalog:
                found.append(
                    f"duplicate provider id {provider_id!r}: already provided by {owners.get(provider_id)}"
                )
            problems.extend(f"provider {provider_id}: {problem}" for problem in found)
        if problems:
            raise PluginRejected("; ".join(problems))

    def _reject(
        self,
        catalog: ProviderCatalog,
        plugin_id: str,
        version: str | None,
        exc: PluginRejected,
        other_versions: tuple[str, ...] = (),
    ) -> PluginHealth:
        health = PluginHealth(
            plugin_id, version, PluginStatus.REJECTED, exc.reason, exc.providers, None, other_versions
        )
        for provider_id in exc.providers or (None,):
            catalog.reject(health.source, exc.reason, provider_id=provider_id)
        _log.warning(
            "plugin %s is REJECTED: %s", health.source, exc.reason, extra={"event": "PLUGIN_REJECTED"}
        )
        self._record(health)
        if self._on_rejected is not None:
            self._on_rejected(plugin_id, version, exc.reason)
        return health

    def _record(self, health: PluginHealth) -> PluginHealth:
        self._health.append(health)
        return health
