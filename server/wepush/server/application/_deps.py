"""What every application service is built from; the composition root creates one and shares it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application.audit import Auditor
from wepush.server.application.credentials import TokenHasher
from wepush.server.domain import UnitOfWorkFactory
from wepush.server.domain.secrets import SecretStore


@dataclass(frozen=True, slots=True)
class ImportLimits:
    """Bounds on one CSV/TXT import (seed: size, rows, columns, field length)."""

    max_bytes: int
    max_rows: int
    max_columns: int
    max_field_length: int


@dataclass(frozen=True, slots=True)
class ServiceDeps:
    uow: UnitOfWorkFactory
    clock: Callable[[], datetime]
    auditor: Auditor
    catalog: ProviderCatalog
    secret_store: SecretStore
    tokens: TokenHasher
    import_limits: ImportLimits
