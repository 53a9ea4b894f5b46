"""A PostgreSQL that stalls (a network partition or a frozen host: connections stay open, nothing is
answered) is told as an outage within the pool's deadlines, not waited for as long as the stall lasts."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import make_url

from tests.fixtures.tcp_gate import tcp_gate
from wepush.server.domain import DatabaseUnavailable
from wepush.server.infra.db import PoolSettings, SqlUnitOfWorkFactory, create_database

pytestmark = pytest.mark.postgres

#: Only so that a unit of work that waits for the stall cannot hang the test run; the stall outlasts it.
HANG = 60


async def test_a_unit_of_work_begun_during_a_stall_fails_as_an_outage_and_works_once_it_ends(
    postgres_url: str,
) -> None:
    real = make_url(postgres_url)
    assert real.host is not None
    async with tcp_gate(real.host, real.port or 5432) as gate:
        url = real.set(host="127.0.0.1", port=gate.port).render_as_string(hide_password=False)
        engine = create_database(url, pool=PoolSettings(ping_timeout_seconds=0.5, connect_timeout_seconds=1))
        uow = SqlUnitOfWorkFactory(engine)
        try:
            async with uow(read_only=True) as unit:  # a pooled connection, as a running Service has
                await unit.workspaces.find_by_name("stall")

            gate.stall()
            async with asyncio.timeout(HANG):
                with pytest.raises(DatabaseUnavailable):
                    async with uow(read_only=True) as unit:
                        await unit.workspaces.find_by_name("stall")
            gate.resume()

            async with asyncio.timeout(HANG):
                async with uow(read_only=True) as unit:
                    await unit.workspaces.find_by_name("stall")
        finally:
            gate.resume()
            await engine.dispose()
