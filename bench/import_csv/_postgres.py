"""A throw-away PostgreSQL database for one benchmark phase (created and dropped WITH (FORCE))."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@asynccontextmanager
async def temporary_database(prefix: str = "wepush_bench") -> AsyncIterator[str]:
    """Yields the database name; the DSN is ``postgresql://postgres@127.0.0.1:5432/<name>``."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield name
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def dsn(name: str) -> str:
    return ADMIN_DSN.rsplit("/", 1)[0] + f"/{name}"
