"""0004 makes live names unique; an existing database that already repeats a live name upgrades anyway:
the oldest keeps its name, later ones get their id as a suffix, deleted ones are left alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.contract.repositories._world import add_workspace
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Audience, NameAlreadyUsed
from wepush.server.infra.db import SqlUnitOfWorkFactory, create_database, upgrade_database_async

EMPTY = [
    pytest.param("empty_sqlite_url", id="sqlite"),
    pytest.param("empty_postgres_url", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.mark.parametrize("empty_url", EMPTY)
async def test_repeated_live_names_are_renamed_and_then_refused(
    empty_url: str, request: pytest.FixtureRequest, db_clock: SteppingClock
) -> None:
    url = str(request.getfixturevalue(empty_url))
    await upgrade_database_async(url, "0003_import_staging_bulk")
    engine = create_database(url)
    try:
        uow = SqlUnitOfWorkFactory(engine, clock=db_clock)
        workspace = await add_workspace(uow, db_clock.now)
        other_workspace = await add_workspace(uow, db_clock.now, "other")
        audiences = []
        for workspace_id in (workspace.id, workspace.id, other_workspace.id, workspace.id):
            db_clock.advance(timedelta(minutes=1))
            audiences.append(
                Audience(
                    workspace_id=workspace_id,
                    name="customers",
                    created_at=db_clock.now,
                    updated_at=db_clock.now,
                )
            )
        async with uow() as unit:
            for audience in audiences:
                await unit.audiences.add(audience)
            await unit.audiences.delete(workspace.id, audiences[3].id, expected_version=1)

        await upgrade_database_async(url)

        async with uow(read_only=True) as unit:
            names = [(await unit.audiences.get(a.workspace_id, a.id)).name for a in audiences[:3]]
        with pytest.raises(NameAlreadyUsed):
            async with uow() as unit:
                await unit.audiences.add(replace(audiences[0], id="another-audience"))
    finally:
        await engine.dispose()

    assert names == ["customers", f"customers ({audiences[1].id})", "customers"]
