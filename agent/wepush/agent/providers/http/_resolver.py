"""An aiohttp resolver that only hands vetted addresses to the connector.

aiohttp connects to exactly the addresses its resolver returns, so filtering here
closes the DNS-rebinding gap that a "resolve, check, then let the client resolve
again" design leaves open: the address that was checked is the address used.
Literal IP hosts never reach a resolver in aiohttp; the session vets those itself
before issuing the request (see ``_transport.vet_url``).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from ._address_policy import AddressPolicy, AddressRefusedError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["VettingResolver"]


class VettingResolver(AbstractResolver):
    """Resolve with ``inner`` (getaddrinfo by default) and drop refused addresses.

    If every resolved address is refused the lookup fails with
    :class:`AddressRefusedError`, which aiohttp surfaces as the ``os_error`` of a
    ``ClientConnectorDNSError``.
    """

    def __init__(
        self,
        policy: AddressPolicy,
        inner: AbstractResolver | None = None,
        *,
        inner_factory: Callable[[], AbstractResolver] = ThreadedResolver,
    ) -> None:
        self._policy = policy
        self._inner = inner if inner is not None else inner_factory()

    @property
    def policy(self) -> AddressPolicy:
        return self._policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        resolved = await self._inner.resolve(host, port, family)
        vetted: list[ResolveResult] = []
        reasons: list[str] = []
        for entry in resolved:
            reason = self._policy.refusal_reason(entry["host"])
            if reason is None:
                vetted.append(entry)
            else:
                reasons.append(reason)
        if not vetted:
            # Name the first reason only: the address itself stays out of messages
            # that may reach diagnostics.
            raise AddressRefusedError(host, reasons[0] if reasons else "no address resolved")
        return vetted

    async def close(self) -> None:
        await self._inner.close()
