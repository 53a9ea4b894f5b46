"""The ``wepush`` console script: serve, migrate, agent, plugin, version."""

from __future__ import annotations

from wepush.cli.main import main

__all__ = ["main"]
