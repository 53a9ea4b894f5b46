from __future__ import annotations

import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from wepush.agent.providers.http import AddressPolicy, AddressRefusedError, VettingResolver


class StaticResolver(AbstractResolver):
    """Answers every lookup with fixed addresses, like a DNS server under an attacker's control."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.addresses
        ]

    async def close(self) -> None:
        self.closed = True


async def test_only_vetted_addresses_are_returned_to_the_connector() -> None:
    resolver = VettingResolver(AddressPolicy(), StaticResolver("10.0.0.5", "93.184.216.34", "::1"))

    results = await resolver.resolve("mixed.example", 443)

    assert [r["host"] for r in results] == ["93.184.216.34"]


@pytest.mark.parametrize("address", ["127.0.0.1", "169.254.169.254", "fd00:ec2::254", "::ffff:127.0.0.1"])
async def test_a_name_resolving_only_to_forbidden_addresses_is_refused(address: str) -> None:
    resolver = VettingResolver(AddressPolicy(), StaticResolver(address))

    with pytest.raises(AddressRefusedError) as raised:
        await resolver.resolve("rebind.example", 80)

    assert raised.value.address == "rebind.example"
    assert address not in str(raised.value)


async def test_allow_list_applies_to_resolved_addresses() -> None:
    resolver = VettingResolver(AddressPolicy.from_cidrs(["10.0.0.0/8"]), StaticResolver("10.0.0.5"))

    results = await resolver.resolve("intranet.example", 80)

    assert [r["host"] for r in results] == ["10.0.0.5"]


async def test_closing_closes_the_inner_resolver() -> None:
    inner = StaticResolver("93.184.216.34")

    await VettingResolver(AddressPolicy(), inner).close()

    assert inner.closed
