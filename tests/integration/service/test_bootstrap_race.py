"""Service instances that start together on an empty database issue one bootstrap admin token between them."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from tests.contract.repositories._world import add_workspace
from wepush.server.application.bootstrap import SystemBootstrap
from wepush.server.application.credentials import TokenHasher
from wepush.server.domain import PageRequest, UnitOfWork
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


class _GatedTokens:
    def __init__(self, inner: Any, gate: _TokenCheckGate) -> None:
        self._inner = inner
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def list_page(self, *args: Any, **kwargs: Any) -> Any:
        page = await self._inner.list_page(*args, **kwargs)
        await self._gate.after_check()
        return page


class _GatedUnitOfWork:
    def __init__(self, inner: UnitOfWork, gate: _TokenCheckGate) -> None:
        self._inner = inner
        self.api_tokens = _GatedTokens(inner.api_tokens, gate)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _GatedFactory:
    """The real unit-of-work factory, with the gate on the token check of writing units of work."""

    def __init__(self, inner: SqlUnitOfWorkFactory, gate: _TokenCheckGate) -> None:
        self._inner = inner
        self._gate = gate
        self.concurrent = inner.concurrent
        self.writers_side_by_side = inner.writers_side_by_side

    def __call__(self, *, read_only: bool = False) -> Any:
        if read_only:
            return self._inner(read_only=True)
        return self._gated()

    @asynccontextmanager
    async def _gated(self) -> AsyncIterator[_GatedUnitOfWork]:
        async with self._inner() as uow:
            yield _GatedUnitOfWork(uow, self._gate)


async def test_two_instances_starting_together_issue_one_bootstrap_token(
    uow_factory: SqlUnitOfWorkFactory,
) -> None:
    workspace = await add_workspace(uow_factory, NOW)
    gate = _TokenCheckGate()
    factory: Any = _GatedFactory(uow_factory, gate)
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
