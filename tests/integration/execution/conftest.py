"""Fixtures for execution tests: a real-clock unit of work on the parametrized database (SQLite and
PostgreSQL), a local artifact store, a secret store, the availability hint, and embedded agents for the
test module's ``world``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.integration.execution._world import AgentFactory, World, make_agent
from wepush.agent.engine import ProviderFactory
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.execution import EmbeddedAgent
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyRing


@pytest.fixture
def uow(db_engine: AsyncEngine) -> SqlUnitOfWorkFactory:
    # Leases expire on real time in these tests, so the repositories use the real clock too.
    return SqlUnitOfWorkFactory(db_engine)


@pytest.fixture
def master_key_file(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "master.key"
    MasterKeyRing.create_standalone(path)
    return path


@pytest.fixture
def secret_store(master_key_file: Path) -> LocalEnvelopeSecretStore:
    return LocalEnvelopeSecretStore(MasterKeyRing.create_standalone(master_key_file))


@pytest.fixture
def artifact_dir(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


@pytest.fixture
def artifact_store(artifact_dir: Path) -> LocalArtifactStore:
    return LocalArtifactStore(artifact_dir)


@pytest.fixture
def notifier() -> RunAvailabilityNotifier:
    return RunAvailabilityNotifier()


@pytest.fixture
async def agents(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    secret_store: LocalEnvelopeSecretStore,
    notifier: RunAvailabilityNotifier,
    world: World,
) -> AsyncIterator[AgentFactory]:
    """Embedded agents for the module's ``world`` (see :data:`AgentFactory`), each shut down after the
    test."""
    started: list[EmbeddedAgent] = []

    def start(factory: ProviderFactory, **options: Any) -> EmbeddedAgent:
        agent = make_agent(
            uow,
            ProviderCatalog.from_factories([factory]),
            artifact_store,
            secret_store,
            notifier,
            world.workspace.id,
            **options,
        )
        started.append(agent)
        return agent

    yield start
    for agent in started:
        await agent.shutdown()
