"""ExecutionEngine: validates a run in the seed's order, opens its resources and hands it to a coordinator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ._commands import CommandResult, RunCommand
from ._config import ConfigDocument
from ._coordinator import RunCoordinator
from ._enums import RunState, ValidationCategory
from ._errors import EngineValidationError
from ._options import EngineOptions
from ._ports import ExecutionPorts
from ._provider import (
    SPI_VERSION,
    ProviderDescriptor,
    ProviderFactory,
    ProviderOpenContext,
    ProviderSession,
    ValidationIssue,
)
from ._redact import redact_diagnostic
from ._results import Counts, RunSummary
from ._secrets import SecretRef, SecretResolver, SecretValue
from ._sessions import ProviderSessionManager
from ._spec import RunExecutionSpec

__all__ = ["ExecutionEngine", "ProviderLookup", "RunHandle"]

ProviderLookup = Mapping[str, ProviderFactory] | Callable[[str], ProviderFactory | None]

_OPTIONAL_PORTS = frozenset({"redactor", "observer", "dispatch_fence"})


class RunHandle:
    """The caller's view of a started run: state, live counts, commands and the final summary."""

    def __init__(self, coordinator: RunCoordinator) -> None:
        self._coordinator = coordinator

    @property
    def run_id(self) -> str:
        return self._coordinator.run_id

    @property
    def state(self) -> RunState:
        return self._coordinator.state

    @property
    def effective_concurrency(self) -> int:
        return self._coordinator.effective_concurrency

    @property
    def peak_concurrency(self) -> int:
        return self._coordinator.peak_concurrency

    def counts(self) -> Counts:
        return self._coordinator.counts()

    async def submit(self, command: RunCommand) -> CommandResult:
        """Idempotent by ``command_id``: a repeat returns the first result without acting again."""
        return self._coordinator.submit(command)

    async def completion(self) -> RunSummary:
        """Wait for the run to end; safe to await from several places and after completion."""
        return await self._coordinator.completion()

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, state={self.state.value})"


@dataclass(slots=True)
class _TrackingResolver:
    """Closes every secret handed to the provider when the run ends, even if the provider forgets."""

    inner: SecretResolver
    issued: list[SecretValue] = field(default_factory=list)

    async def resolve(self, ref: SecretRef) -> SecretValue:
        value = await self.inner.resolve(ref)
        self.issued.append(value)
        return value

    def close_all(self) -> None:
        for value in self.issued:
            value.close()


class ExecutionEngine:
    """Holds no mutable state across runs: each ``start`` creates an independent RunCoordinator."""

    def __init__(self, providers: ProviderLookup, options: EngineOptions | None = None) -> None:
        self._options = options or EngineOptions()
        problems = self._options.validate()
        if problems:
            raise ValueError("invalid engine options: " + "; ".join(problems))
        self._lookup: Callable[[str], ProviderFactory | None] = (
            providers.get if isinstance(providers, Mapping) else providers
        )

    @property
    def options(self) -> EngineOptions:
        return self._options

    async def start(
        self, spec: RunExecutionSpec, ports: ExecutionPorts, *, capacity: int | None = None
    ) -> RunHandle:
        """Validate and open the run, then return once it is RUNNING.

        Raises ``EngineValidationError`` with a stable category; everything opened so far is closed again.
        ``capacity`` is what the Service granted this run, on top of the engine's own capacity option.
        """
        _check_spec(spec, ports, capacity)
        violations = spec.policies.validate()
        if violations:
            raise EngineValidationError(
                ValidationCategory.POLICY_INVALID, "execution policies are inconsistent", violations
            )
        factory, descriptor = self._resolve_provider(spec)
        _check_schema_versions(spec, descriptor)
        _check_configs(factory, spec)
        session, resolver = await _open_resources(factory, spec, ports)
        # Closing the session also wipes the secrets resolved for the run.
        sessions = ProviderSessionManager(session, descriptor.thread_safety, on_close=resolver.close_all)
        coordinator = RunCoordinator(
            spec=spec,
            ports=ports,
            descriptor=descriptor,
            sessions=sessions,
            options=self._options,
            capacity=capacity,
        )
        coordinator.begin()
        return RunHandle(coordinator)

    def _resolve_provider(self, spec: RunExecutionSpec) -> tuple[ProviderFactory, ProviderDescriptor]:
        unavailable = ValidationCategory.PROVIDER_NOT_AVAILABLE
        factory = self._lookup(spec.provider.id)
        if factory is None:
            raise EngineValidationError(unavailable, f"provider {spec.provider.id!r} is not installed")
        try:
            descriptor = factory.descriptor()
        except Exception as exc:
            raise EngineValidationError(unavailable, _describe("provider descriptor failed", exc)) from None
        if descriptor.spi_major != SPI_VERSION:
            raise EngineValidationError(
                unavailable, f"provider SPI {descriptor.spi_version} is incompatible with SPI {SPI_VERSION}"
            )
        wanted = spec.provider.version
        if wanted is not None and wanted != descriptor.version:
            raise EngineValidationError(
                unavailable,
                f"provider {descriptor.provider_id} {wanted} requested, {descriptor.version} installed",
            )
        return factory, descriptor


def _check_spec(spec: RunExecutionSpec, ports: ExecutionPorts, capacity: int | None) -> None:
    issues: list[ValidationIssue] = []
    if not isinstance(spec, RunExecutionSpec):
        raise EngineValidationError(ValidationCategory.SPEC_INVALID, "spec must be a RunExecutionSpec")
    if not isinstance(spec.run_id, str) or not spec.run_id.strip():
        issues.append(ValidationIssue("runId", "REQUIRED", "runId must be a non-empty string"))
    if spec.provider is None or not spec.provider.id:
        issues.append(ValidationIssue("provider.id", "REQUIRED", "provider id must be set"))
    for name in ("account_config", "message_config"):
        if not isinstance(getattr(spec, name), ConfigDocument):
            issues.append(ValidationIssue(name, "REQUIRED", f"{name} must be a ConfigDocument"))
    if ports is None:
        issues.append(ValidationIssue("ports", "REQUIRED", "execution ports must be given"))
    else:
        for name in ports.__slots__:
            if name not in _OPTIONAL_PORTS and getattr(ports, name) is None:
                issues.append(ValidationIssue(f"ports.{name}", "REQUIRED", f"{name} must be given"))
    if capacity is not None and capacity < 1:
        issues.append(ValidationIssue("capacity", "OUT_OF_RANGE", "capacity must be at least 1"))
    if issues:
        raise EngineValidationError(
            ValidationCategory.SPEC_INVALID, "the run specification is incomplete", issues
        )


def _check_schema_versions(spec: RunExecutionSpec, descriptor: ProviderDescriptor) -> None:
    issues = [
        ValidationIssue(
            name, "SCHEMA_VERSION_UNSUPPORTED", f"schema version {doc.schema_version!r} is not supported"
        )
        for name, doc in (("accountConfig", spec.account_config), ("messageConfig", spec.message_config))
        if doc.schema_version not in descriptor.schema_versions
    ]
    if issues:
        raise EngineValidationError(
            ValidationCategory.SCHEMA_VERSION_UNSUPPORTED,
            f"{descriptor.provider_id} supports schema versions {', '.join(descriptor.schema_versions)}",
            issues,
        )


def _check_configs(factory: ProviderFactory, spec: RunExecutionSpec) -> None:
    invalid = ValidationCategory.PROVIDER_CONFIG_INVALID
    try:
        account = factory.validate_account(spec.account_config)
        message = factory.validate_message(spec.message_config)
    except Exception as exc:
        raise EngineValidationError(invalid, _describe("configuration validation failed", exc)) from None
    if not account.ok or not message.ok:
        raise EngineValidationError(
            invalid, "the provider rejected the configuration", (*account.issues, *message.issues)
        )


async def _open_resources(
    factory: ProviderFactory, spec: RunExecutionSpec, ports: ExecutionPorts
) -> tuple[ProviderSession, _TrackingResolver]:
    """Steps 6-8: source, sinks, session. On failure, whatever was opened is closed again."""
    opened: list[Callable[[], Awaitable[object]]] = []

    async def undo() -> None:
        for close in reversed(opened):
            try:
                await close()
            except Exception:  # noqa: S112 - best effort: the validation error is what the caller needs
                continue

    try:
        await ports.recipient_source.open()
    except Exception as exc:
        raise EngineValidationError(
            ValidationCategory.RECIPIENT_SOURCE_UNAVAILABLE,
            _describe("recipient source cannot be opened", exc),
        ) from None
    opened.append(ports.recipient_source.close)
    try:
        await ports.result_sink.open()
        opened.append(ports.result_sink.close)
        await ports.artifact_sink.open()
        opened.append(ports.artifact_sink.close)
    except Exception as exc:
        await undo()
        raise EngineValidationError(
            ValidationCategory.SINK_UNAVAILABLE, _describe("result or artifact sink is not writable", exc)
        ) from None
    resolver = _TrackingResolver(ports.secret_resolver)
    context = ProviderOpenContext(
        run_id=spec.run_id,
        account_config=spec.account_config,
        message_config=spec.message_config,
        secrets=resolver,
        policies=spec.policies,
        dry_run=spec.dry_run,
        clock=ports.clock,
        attributes=spec.attributes,
    )
    try:
        session = await factory.open(context)
    except Exception as exc:
        resolver.close_all()
        await undo()
        raise EngineValidationError(
            ValidationCategory.PROVIDER_SESSION_FAILED, _describe("provider session cannot be opened", exc)
        ) from None
    return session, resolver


def _describe(prefix: str, exc: BaseException) -> str:
    detail = redact_diagnostic(f"{type(exc).__name__}: {exc}", limit=512)
    return f"{prefix}: {detail}"
