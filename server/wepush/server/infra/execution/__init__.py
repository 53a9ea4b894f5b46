"""The embedded agent: the standalone Service's in-process executor of runs."""

from __future__ import annotations

from ._agent import EmbeddedAgent
from ._settings import EXPIRED_CAUSE, RESTART_CAUSE, EmbeddedAgentSettings

__all__ = ["EXPIRED_CAUSE", "RESTART_CAUSE", "EmbeddedAgent", "EmbeddedAgentSettings"]
