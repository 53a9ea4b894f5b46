"""Secret records by master key version, across workspaces: what a rotation still has to re-wrap."""

from __future__ import annotations

from dataclasses import replace

from tests.contract.repositories._world import add_workspace, secret_record
from tests.fixtures.db import SteppingClock
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def test_records_not_under_a_version_are_listed_oldest_first_and_counted_per_version(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    first = await add_workspace(uow_factory, db_clock.now, "first")
    second = await add_workspace(uow_factory, db_clock.now, "second")
    template = secret_record(first.id, db_clock.now)
    records = []
    for index, (workspace, version) in enumerate([(first, 1), (second, 2), (second, 1), (first, 3)]):
        db_clock.advance()
        records.append(
            replace(
                template,
                id=f"record-{index}",
                workspace_id=workspace.id,
                name=f"secret-{index}",
                key_version=version,
                created_at=db_clock.now,
            )
        )
    async with uow_factory() as uow:
        for record in records:
            await uow.secret_records.add(record)

    async with uow_factory(read_only=True) as uow:
        pending = await uow.secret_records.list_not_wrapped_by(3, 10)
        first_two = await uow.secret_records.list_not_wrapped_by(3, 2)
        usage = await uow.secret_records.count_by_key_version()
        oldest_per_version = [await uow.secret_records.first_wrapped_by(v) for v in (1, 2, 3, 4)]

    assert [r.id for r in pending] == ["record-0", "record-1", "record-2"]
    assert [r.id for r in first_two] == ["record-0", "record-1"]
    assert usage == {1: 2, 2: 1, 3: 1}
    assert [r.id if r else None for r in oldest_per_version] == ["record-0", "record-1", "record-3", None]
    assert oldest_per_version[0] == records[0]
