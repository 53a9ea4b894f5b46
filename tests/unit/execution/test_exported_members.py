"""The execution packages export exactly their curated public names."""

from __future__ import annotations

import types

import pytest

import wepush.server.application.execution as execution
import wepush.server.infra.artifacts as artifacts
import wepush.server.infra.execution as embedded


@pytest.mark.parametrize("package", [execution, artifacts, embedded], ids=lambda p: p.__name__)
def test_every_public_member_is_exported_and_every_export_exists(package: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert set(package.__all__) == public


def test_the_composition_root_finds_what_it_wires() -> None:
    assert {"EmbeddedAgent", "EmbeddedAgentSettings"} <= set(embedded.__all__)
    assert {"RunAvailabilityNotifier", "ArtifactDownloads", "ArtifactStore", "snapshot_for_job"} <= set(
        execution.__all__
    )
    assert artifacts.__all__ == ["ArtifactStoreUnavailable", "LocalArtifactStore", "S3ArtifactStore"]
