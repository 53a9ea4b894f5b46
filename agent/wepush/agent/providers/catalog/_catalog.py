"""``ProviderCatalog``: the providers an Agent or Service may run, and why others were refused.

Built-in and installed providers arrive through the same path, the
``wepush.providers`` entry-point group, so there is one execution semantics.
A plugin loader (signed plugin directories, a later step) feeds factories in
through :meth:`ProviderCatalog.add` and records its own refusals with
:meth:`ProviderCatalog.reject`; the catalog itself never scans directories.

A refused provider never stops the others: the catalog becomes DEGRADED and
the reason is kept for health reports and audit.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from wepush.agent.providers.spi import ProviderDescriptor, ProviderFactory, redact_diagnostic

from ._checks import descriptor_problems

__all__ = [
    "ENTRY_POINT_GROUP",
    "CatalogHealth",
    "CatalogState",
    "ProviderCatalog",
    "ProviderHealth",
    "ProviderStatus",
]

ENTRY_POINT_GROUP = "wepush.providers"

_FACTORY_METHODS = ("descriptor", "validate_account", "validate_message", "test_connection", "open")


class ProviderStatus(enum.StrEnum):
    ACTIVE = "ACTIVE"
    REJECTED = "REJECTED"


class CatalogState(enum.StrEnum):
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"


@dataclass(frozen=True, slots=True)
class ProviderHealth:
    """One provider candidate: where it came from, whether it is usable, and why not."""

    source: str
    status: ProviderStatus
    provider_id: str | None = None
    version: str | None = None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CatalogHealth:
    state: CatalogState
    providers: tuple[ProviderHealth, ...]

    @property
    def rejected(self) -> tuple[ProviderHealth, ...]:
        return tuple(p for p in self.providers if p.status is ProviderStatus.REJECTED)


def _reason(prefix: str, exc: BaseException) -> str:
    # Import and descriptor errors may quote configuration; keep them short and redacted.
    return redact_diagnostic(f"{prefix}: {type(exc).__name__}: {exc}", limit=300) or prefix


class ProviderCatalog:
    """Validated providers by id. Build it once at start-up, then share it read-only."""

    def __init__(self) -> None:
        self._factories: dict[str, ProviderFactory] = {}
        self._descriptors: dict[str, ProviderDescriptor] = {}
        self._health: list[ProviderHealth] = []

    @classmethod
    def from_entry_points(
        cls,
        *,
        group: str = ENTRY_POINT_GROUP,
        discovered: Iterable[EntryPoint] | None = None,
    ) -> ProviderCatalog:
        """Load every factory registered under ``group``; ``discovered`` replaces the installed set."""
        catalog = cls()
        points = entry_points(group=group) if discovered is None else discovered
        for point in sorted(points, key=lambda p: p.name):
            catalog.add_entry_point(point)
        return catalog

    @classmethod
    def from_factories(
        cls, factories: Iterable[ProviderFactory], *, source: str = "explicit"
    ) -> ProviderCatalog:
        """A catalog of exactly these factories (embedded use, tests)."""
        catalog = cls()
        for index, factory in enumerate(factories):
            catalog.add(factory, source=f"{source}[{index}]")
        return catalog

    def add_entry_point(self, point: EntryPoint) -> ProviderHealth:
        source = f"entry point {point.name} = {point.value}"
        try:
            loaded = point.load()
        except Exception as exc:
            return self.reject(source, _reason("cannot be imported", exc), provider_id=point.name)
        try:
            factory = loaded() if inspect.isclass(loaded) else loaded
        except Exception as exc:
            return self.reject(source, _reason("factory cannot be constructed", exc), provider_id=point.name)
        return self.add(factory, source=source, expected_id=point.name)

    def add(self, factory: object, *, source: str, expected_id: str | None = None) -> ProviderHealth:
        """Validate and register one factory; a refusal is recorded, never raised."""
        missing = [name for name in _FACTORY_METHODS if not callable(getattr(factory, name, None))]
        if missing:
            return self.reject(source, f"not a ProviderFactory: missing {', '.join(missing)}", expected_id)
        typed: ProviderFactory = factory  # type: ignore[assignment]
        try:
            descriptor = typed.descriptor()
        except Exception as exc:
            return self.reject(source, _reason("descriptor cannot be loaded", exc), expected_id)
        if not isinstance(descriptor, ProviderDescriptor):
            return self.reject(source, "descriptor() did not return a ProviderDescriptor", expected_id)
        problems = descriptor_problems(descriptor)
        provider_id = descriptor.provider_id
        if expected_id is not None and expected_id != provider_id:
            problems.append(f"registered as {expected_id!r} but the descriptor says {provider_id!r}")
        if provider_id in self._factories:
            owner = next(
                h.source
                for h in self._health
                if h.provider_id == provider_id and h.status is ProviderStatus.ACTIVE
            )
            problems.append(f"duplicate provider id {provider_id!r}: already provided by {owner}")
        if problems:
            return self._record(
                ProviderHealth(
                    source, ProviderStatus.REJECTED, provider_id, descriptor.version, tuple(problems)
                )
            )
        self._factories[provider_id] = typed
        self._descriptors[provider_id] = descriptor
        return self._record(ProviderHealth(source, ProviderStatus.ACTIVE, provider_id, descriptor.version))

    def reject(self, source: str, reason: str, provider_id: str | None = None) -> ProviderHealth:
        """Record a candidate refused before it became a factory (import error, bad signature...)."""
        return self._record(ProviderHealth(source, ProviderStatus.REJECTED, provider_id, None, (reason,)))

    def _record(self, health: ProviderHealth) -> ProviderHealth:
        self._health.append(health)
        return health

    def get(self, provider_id: str) -> ProviderFactory | None:
        """The active factory for ``provider_id``; usable directly as the engine's provider lookup."""
        return self._factories.get(provider_id)

    def __contains__(self, provider_id: object) -> bool:
        return provider_id in self._factories

    def list(self) -> tuple[ProviderDescriptor, ...]:
        """Descriptors of the active providers, ordered by id."""
        return tuple(self._descriptors[key] for key in sorted(self._descriptors))

    def health(self) -> CatalogHealth:
        state = (
            CatalogState.DEGRADED
            if any(h.status is ProviderStatus.REJECTED for h in self._health)
            else (CatalogState.HEALTHY)
        )
        return CatalogHealth(state, tuple(self._health))

    def lookup(self) -> Callable[[str], ProviderFactory | None]:
        return self.get

    def __repr__(self) -> str:
        return f"ProviderCatalog(active={sorted(self._factories)}, rejected={len(self.health().rejected)})"
