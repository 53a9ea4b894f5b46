"""Settings of the embedded agent and the causes it records when it recovers runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from wepush.agent.engine import EngineOptions
from wepush.server.application.execution import RetentionPolicy

__all__ = ["EXPIRED_CAUSE", "RESTART_CAUSE", "EmbeddedAgentSettings"]

RESTART_CAUSE = "the Service restarted while the run was executing"
EXPIRED_CAUSE = "the run's lease expired: its executor stopped renewing it"


@dataclass(frozen=True, slots=True)
class EmbeddedAgentSettings:
    """``max_runs`` runs execute at once; ``max_concurrency`` is the engine capacity each run may use.

    ``agent_name`` identifies this agent across restarts: on start, leases still ACTIVE under that name
    belong to a previous process that died, and their runs are recovered at once. Two live instances
    (server mode) must use different names.
    """

    max_runs: int = 2
    max_concurrency: int = 200
    agent_name: str = "embedded"
    lease_ttl: timedelta = timedelta(seconds=30)
    scan_interval: timedelta = timedelta(seconds=5)
    command_poll_interval: timedelta = timedelta(seconds=1)
    shutdown_grace: timedelta = timedelta(seconds=10)
    cancel_settle_timeout: timedelta = timedelta(seconds=30)
    """After the grace period the runs are cancelled; this bounds the wait for them to flush and finish."""
    engine_options: EngineOptions = field(default_factory=lambda: EngineOptions(result_batch_size=1000))
    """The largest result batches the engine allows: half the append transactions of the default."""
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    settle_batch_size: int = 500
    claim_failure_limit: int = 20
    """Consecutive failed claim scans after which the agent gives up and shuts down (passes failed by a
    database outage do not count: those are waited out)."""

    def __post_init__(self) -> None:
        if self.max_runs < 1 or self.max_concurrency < 1:
            raise ValueError("max_runs and max_concurrency must be at least 1")
        if self.lease_ttl <= timedelta(seconds=1):
            raise ValueError("lease_ttl must be longer than one second")
