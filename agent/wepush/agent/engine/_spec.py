"""The immutable description of one run handed to the engine."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from ._config import ConfigDocument, ProviderRef
from ._policies import ExecutionPolicies

__all__ = ["RunExecutionSpec"]


@dataclass(frozen=True, slots=True)
class RunExecutionSpec:
    """Ports (recipients, secrets, sinks, clock) are passed separately and never serialised into the spec."""

    run_id: str
    provider: ProviderRef
    account_config: ConfigDocument
    message_config: ConfigDocument
    policies: ExecutionPolicies
    attributes: Mapping[str, str] = field(default_factory=dict)
    dry_run: bool = False
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attributes, MappingProxyType):
            object.__setattr__(self, "attributes", MappingProxyType(dict(self.attributes)))
