"""The victim of the crash-recovery test: an embedded agent in its own process, executing until it is
killed with SIGKILL (no shutdown, no flush, no lease release: a power cut)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

from tests.integration.execution._world import loopback_http_catalog, make_agent
from wepush.agent.engine import EngineOptions
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyRing


async def main(config: dict[str, Any]) -> None:
    engine = create_database(config["database"])
    agent = make_agent(
        SqlUnitOfWorkFactory(engine),
        loopback_http_catalog(),
        LocalArtifactStore(config["artifacts"]),
        LocalEnvelopeSecretStore(MasterKeyRing.create_standalone(config["masterKey"])),
        RunAvailabilityNotifier(),
        config["workspace"],
        agent_name=config["agentName"],
        max_runs=1,
        engine_options=EngineOptions(
            read_batch_size=10,
            read_low_water=config["readLowWater"],
            result_batch_size=100,
            progress_interval=timedelta(milliseconds=500),
        ),
    )
    await agent.start()
    print("agent started", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
