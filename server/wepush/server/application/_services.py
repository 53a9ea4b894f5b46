"""The bundle of application services a request handler can reach, assembled by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wepush.server.application.auth import Authenticator
from wepush.server.application.health import HealthService


@dataclass(slots=True)
class ApplicationServices:
    """Everything the API layer may call. Handlers translate; these services decide."""

    health: HealthService
    auth: Authenticator
    mode: str
    version: str
    extra: dict[str, Any] = field(default_factory=dict)
