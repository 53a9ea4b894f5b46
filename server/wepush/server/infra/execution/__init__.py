"""The embedded agent: the standalone Service's in-process executor of runs."""

from __future__ import annotations

from ._agent import AgentNameInUse, EmbeddedAgent
from ._settings import EXPIRED_CAUSE, RESTART_CAUSE, EmbeddedAgentSettings

__all__ = ["EXPIRED_CAUSE", "RESTART_CAUSE", "AgentNameInUse", "EmbeddedAgent", "EmbeddedAgentSettings"]
