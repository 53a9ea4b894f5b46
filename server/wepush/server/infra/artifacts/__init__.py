"""Artifact stores: where artifact bytes live (the database keeps their lifecycle)."""

from __future__ import annotations

from ._local import LocalArtifactStore
from ._s3 import ArtifactStoreUnavailable, S3ArtifactStore

__all__ = ["ArtifactStoreUnavailable", "LocalArtifactStore", "S3ArtifactStore"]
