"""Shared fixtures: real SQLite and PostgreSQL databases (tests/fixtures/db.py) and an S3 endpoint
(tests/fixtures/s3.py)."""

from __future__ import annotations

pytest_plugins = ["tests.fixtures.db", "tests.fixtures.s3"]
