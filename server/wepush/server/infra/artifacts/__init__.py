"""Artifact stores: where artifact bytes live (the database keeps their lifecycle)."""

from __future__ import annotations

from ._local import LocalArtifactStore

__all__ = ["LocalArtifactStore"]
