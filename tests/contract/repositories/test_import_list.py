"""An audience's imports, newest first, filtered by the state each import has now: an open import past its
deadline is EXPIRED for the filter before the retention sweep stores it so."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.contract.repositories._world import add_workspace, new_import
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Audience, AudienceImport, ImportState, PageRequest
from wepush.server.infra.db import SqlUnitOfWorkFactory


async def _imports_by_name(
    uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock
) -> tuple[Audience, dict[str, AudienceImport]]:
    """One import per stored state, a second apart (newest last), two of them open past their deadline,
    and one import of another audience of the same workspace."""
    workspace = await add_workspace(uow_factory, clock.now)
    audiences = [
        Audience(workspace_id=workspace.id, name=name, created_at=clock.now, updated_at=clock.now)
        for name in ("customers", "staff")
    ]
    stored = {
        "created": (ImportState.CREATED, timedelta(days=1)),
        "created-overdue": (ImportState.CREATED, timedelta(seconds=-1)),
        "staging": (ImportState.STAGING, timedelta(days=1)),
        "staged-overdue": (ImportState.STAGED, timedelta(seconds=-1)),
        "staged": (ImportState.STAGED, timedelta(days=1)),
        "committed": (ImportState.COMMITTED, timedelta(seconds=-1)),
        "failed": (ImportState.FAILED, timedelta(days=1)),
        "expired": (ImportState.EXPIRED, timedelta(seconds=-1)),
    }
    imports: dict[str, AudienceImport] = {}
    async with uow_factory() as uow:
        for audience in audiences:
            await uow.audiences.add(audience)
        for name, (state, deadline) in stored.items():
            at = clock.advance()
            imports[name] = await uow.audience_imports.add(
                replace(
                    new_import(workspace.id, audiences[0].id, at, ["mobile"]),
                    state=state,
                    expires_at=at + deadline,
                    original_filename=f"{name}.csv",
                )
            )
        await uow.audience_imports.add(new_import(workspace.id, audiences[1].id, clock.advance(), ["mobile"]))
    # Every deadline of a second is now behind; the day-long ones are not.
    clock.advance(timedelta(minutes=1))
    return audiences[0], imports


async def _names(
    uow_factory: SqlUnitOfWorkFactory,
    clock: SteppingClock,
    audience: Audience,
    states: list[ImportState] | None,
) -> list[str | None]:
    async with uow_factory(read_only=True) as uow:
        page = await uow.audience_imports.list_page(
            audience.workspace_id, audience.id, PageRequest(limit=100), now=clock.now, states=states
        )
    assert not page.has_more
    return [found.original_filename for found in page.items]


async def test_imports_are_listed_newest_first_in_pages_of_their_audience_only(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience, imports = await _imports_by_name(uow_factory, db_clock)
    seen: list[str] = []
    after = None
    async with uow_factory(read_only=True) as uow:
        for _ in range(len(imports)):
            page = await uow.audience_imports.list_page(
                audience.workspace_id, audience.id, PageRequest(limit=3, after=after), now=db_clock.now
            )
            seen.extend(found.id for found in page.items)
            after = page.next_after
            if after is None:
                break

    assert seen == [found.id for found in reversed(imports.values())]


async def test_a_state_filter_matches_the_state_each_import_has_now(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience, _ = await _imports_by_name(uow_factory, db_clock)

    assert await _names(uow_factory, db_clock, audience, [ImportState.EXPIRED]) == [
        "expired.csv",
        "staged-overdue.csv",
        "created-overdue.csv",
    ]
    assert await _names(uow_factory, db_clock, audience, [ImportState.CREATED]) == ["created.csv"]
    assert await _names(uow_factory, db_clock, audience, [ImportState.STAGED, ImportState.COMMITTED]) == [
        "committed.csv",
        "staged.csv",
    ]
    assert await _names(uow_factory, db_clock, audience, [ImportState.STAGING, ImportState.FAILED]) == [
        "failed.csv",
        "staging.csv",
    ]
