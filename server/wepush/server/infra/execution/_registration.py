"""The embedded agent's own ``agent`` row: found again by name after a restart, created on first start."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from wepush.agent.engine import SPI_VERSION
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.server.domain import Agent, AgentKind, AgentStatus, JsonObject, Keyset, PageRequest, UnitOfWork

__all__ = ["find_embedded_agent", "register_agent"]


async def find_embedded_agent(uow: UnitOfWork, workspace_id: str, name: str) -> Agent | None:
    """The EMBEDDED agent row registered under ``name``, if any."""
    after: Keyset | None = None
    while True:
        page = await uow.agents.list_page(workspace_id, PageRequest(limit=100, after=after))
        for agent in page.items:
            if agent.kind is AgentKind.EMBEDDED and agent.display_name == name:
                return agent
        if page.next_after is None:
            return None
        after = page.next_after


async def register_agent(
    uow: UnitOfWork,
    *,
    workspace_id: str,
    name: str,
    version: str,
    catalog: ProviderCatalog,
    capacity: JsonObject,
    now: datetime,
) -> Agent:
    """The EMBEDDED agent named ``name``, ONLINE, with its current providers and capacity. Keeping the same
    row across restarts is what lets a new process recognise the leases its dead predecessor held."""
    providers = [{"id": d.provider_id, "version": d.version, "spi": SPI_VERSION} for d in catalog.list()]
    existing = await find_embedded_agent(uow, workspace_id, name)
    if existing is not None:
        return await uow.agents.update(
            replace(
                existing,
                status=AgentStatus.ONLINE,
                agent_version=version,
                providers=providers,
                capacity=capacity,
                last_seen_at=now,
            )
        )
    return await uow.agents.add(
        Agent(
            workspace_id=workspace_id,
            display_name=name,
            kind=AgentKind.EMBEDDED,
            status=AgentStatus.ONLINE,
            agent_version=version,
            protocol_version="embedded",
            providers=providers,
            capacity=capacity,
            last_seen_at=now,
            created_at=now,
            updated_at=now,
        )
    )
