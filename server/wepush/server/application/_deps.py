"""What every application service is built from; the composition root creates one and shares it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from wepush.agent.engine import SecretMasker
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application._import_receiving import ReceivingPolicy
from wepush.server.application.audit import Auditor
from wepush.server.application.credentials import TokenHasher
from wepush.server.domain import UnitOfWorkFactory
from wepush.server.domain.secrets import SecretScrubber, SecretStore


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
    instance_name: str = "service"
    """This Service instance's stable name (the one its embedded agent registers under): the same
    after a restart, never shared by two live instances. An upload records it, so a restart can tell
    the uploads it was receiving when it stopped."""
    redactor: SecretScrubber = field(default_factory=SecretMasker)
    """The Service's redactor (the composition root passes the logging one); a connection test
    registers the secret values it resolves with it. The default applies the shared rules only."""
    receiving: ReceivingPolicy = field(default_factory=ReceivingPolicy)
    """How an upload holds its import while the file arrives (see :mod:`._import_receiving`)."""
