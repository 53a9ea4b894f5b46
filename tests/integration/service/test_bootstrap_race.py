"""Service instances that start together on an empty database issue one bootstrap admin token between them."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from datetime import UTC, datetime
from typing import Any

from tests.contract.repositories._world import add_workspace
from tests.helpers_uow import InterceptedUnit, InterceptingUnitOfWork, Proceed, Statement
from wepush.server.application.bootstrap import SystemBootstrap
from wepush.server.application.credentials import TokenHasher
from wepush.server.domain import PageRequest
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyRing

NOW = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


class _TokenCheckGate:
    """Holds the first writer after its "are there tokens yet?" check until a second writer has made
    the same check (or a second has passed), which is the interleaving two starting instances can hit."""

    def __init__(self) -> None:
        self.checks = 0
        self._second = asyncio.Event()

    async def after_check(self) -> None:
        self.checks += 1
        if self.checks == 1:
            # A timeout means the other writer is queued behind this one: nothing to interleave with.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._second.wait(), timeout=1)
        else:
            self._second.set()


class _GatedFactory(InterceptingUnitOfWork):
    """The real unit-of-work factory, with the gate on the token check of writing units of work."""

    def __init__(self, inner: SqlUnitOfWorkFactory, gate: _TokenCheckGate) -> None:
        super().__init__(inner, statements=[("api_tokens", "list_page")])
        self._gate = gate

    async def around(self, unit: InterceptedUnit, statement: Statement, proceed: Proceed) -> Any:
        page = await proceed()
        if not unit.read_only:
            await self._gate.after_check()
        return page


async def test_two_instances_starting_together_issue_one_bootstrap_token(
    uow_factory: SqlUnitOfWorkFactory,
) -> None:
    workspace = await add_workspace(uow_factory, NOW)
    gate = _TokenCheckGate()
    factory = _GatedFactory(uow_factory, gate)
    store = LocalEnvelopeSecretStore(MasterKeyRing.generate())
    hasher = TokenHasher(secrets.token_bytes(32))
    delivered: list[str] = []

    def instance() -> SystemBootstrap:
        return SystemBootstrap(factory, store, lambda: NOW)

    issued = await asyncio.gather(
        instance().ensure_bootstrap_admin(workspace.id, hasher, delivered.append),
        instance().ensure_bootstrap_admin(workspace.id, hasher, delivered.append),
    )

    async with uow_factory(read_only=True) as uow:
        tokens = await uow.api_tokens.list_page(workspace.id, PageRequest(limit=10))
    assert sorted(issued) == [False, True]
    assert len(delivered) == 1
    assert [t.name for t in tokens.items] == ["bootstrap-admin"]
    assert tokens.items[0].token_hash == hasher.hash(delivered[0])
