"""Fixtures for execution tests: a real-clock unit of work on the parametrized database (SQLite and
PostgreSQL), a local artifact store, a secret store and the availability hint."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from wepush.server.application.execution import RunAvailabilityNotifier
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
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
