"""A master key re-wrap is audited per workspace under the same upper-snake resource type convention as
every other audit event (ACCOUNT, API_TOKEN, …), with counts and field names, never key material."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.contract.repositories._world import add_workspace
from tests.helpers_secrets import add_account_secret
from wepush.server.application.master_key import MasterKeyRewrap
from wepush.server.domain import PageRequest
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database
from wepush.server.infra.secrets import LocalEnvelopeSecretStore, MasterKeyRing

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_a_rewrap_is_audited_under_the_secret_record_resource_type(sqlite_url: str) -> None:
    engine = create_database(sqlite_url)
    try:
        uow = SqlUnitOfWorkFactory(engine)
        workspace = await add_workspace(uow, NOW)
        ring = MasterKeyRing.generate()
        store = LocalEnvelopeSecretStore(ring)
        async with uow() as tx:
            await add_account_secret(
                tx,
                store,
                workspace_id=workspace.id,
                account_id="account-1",
                name="http-token",
                value=b"bearer-4f1c",
                now=NOW,
            )
        active = ring.rotate()

        report = await MasterKeyRewrap(uow, store, lambda: NOW).rewrap_all(active)

        assert report.rewrapped == 1
        async with uow(read_only=True) as tx:
            events = (await tx.audit.list_page(workspace.id, PageRequest(limit=10))).items
        assert [(e.action, e.resource_type, e.actor_type) for e in events] == [
            ("secret.rewrap", "SECRET_RECORD", "SYSTEM")
        ]
        assert "bearer-4f1c" not in str(events[0].details)
    finally:
        await engine.dispose()
