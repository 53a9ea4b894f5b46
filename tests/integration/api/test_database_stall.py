"""A PostgreSQL that stalls (a network partition or a frozen host: connections stay open, nothing is
answered) is told as an outage within the pool's deadlines, not waited for as long as the stall lasts."""

from __future__ import annotations

import asyncio
import socket

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


async def test_every_connection_gives_up_on_a_server_gone_silent_on_the_network(postgres_url: str) -> None:
    """A statement already sent when the server vanishes (no ACKs, no keepalive replies) must not wait
    for ever: the connection's socket probes the silence and gives up after ``dead_peer_seconds``."""
    engine = create_database(postgres_url, pool=PoolSettings(dead_peer_seconds=12))
    try:
        async with engine.connect() as connection:
            raw = await connection.get_raw_connection()
            assert raw.driver_connection is not None
            sock = raw.driver_connection._transport.get_extra_info("socket")
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                pytest.fail(f"the test database must be reached over TCP, not {sock.family!r}")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 4
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 12_000
    finally:
        await engine.dispose()
