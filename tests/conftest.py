"""Shared fixtures: real SQLite and PostgreSQL databases (see tests/fixtures/db.py)."""

from __future__ import annotations

pytest_plugins = ["tests.fixtures.db"]
