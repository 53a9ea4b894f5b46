"""The Provider SPI (major version ``SPI_VERSION``).

A provider implements ``ProviderFactory`` and ``ProviderSession`` and ships its descriptor and JSON Schemas
as package data (see ``load_descriptor_from_package``). Providers import only this package, the engine's
core types and the building blocks channel families share (``wepush.agent.providers.common``), never the
engine internals, the agent runtime or the server.
"""

from __future__ import annotations

from wepush.agent.engine import (
    SPI_VERSION,
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    PreviewNotSupported,
    PreviewResult,
    ProviderCapabilities,
    ProviderDescriptor,
    ProviderFactory,
    ProviderOpenContext,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSchemas,
    ProviderSendRequest,
    ProviderSession,
    RecipientRecord,
    SecretRef,
    SecretResolver,
    SecretValue,
    ThreadSafetyMode,
    ValidationIssue,
    ValidationResult,
    WorkerSessionsNotSupported,
    redact_diagnostic,
)

from ._descriptor import DescriptorError, load_descriptor_from_package, parse_descriptor

__all__ = [
    "SPI_VERSION",
    "CancellationToken",
    "ConfigDocument",
    "ConnectionTestResult",
    "DescriptorError",
    "ErrorCategory",
    "PreviewNotSupported",
    "PreviewResult",
    "ProviderCapabilities",
    "ProviderDescriptor",
    "ProviderFactory",
    "ProviderOpenContext",
    "ProviderPreviewRequest",
    "ProviderResult",
    "ProviderSchemas",
    "ProviderSendRequest",
    "ProviderSession",
    "RecipientRecord",
    "SecretRef",
    "SecretResolver",
    "SecretValue",
    "ThreadSafetyMode",
    "ValidationIssue",
    "ValidationResult",
    "WorkerSessionsNotSupported",
    "load_descriptor_from_package",
    "parse_descriptor",
    "redact_diagnostic",
]
