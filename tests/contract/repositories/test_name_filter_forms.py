"""A name filter is matched in Unicode normal form C, the form names are stored in, on both databases:
"cafe" + U+0301 finds "café" typed with U+00E9, in any case. A name stored decomposed before names were
put in NFC is still found by the filter written the same way."""

from __future__ import annotations

from tests.contract.repositories._world import add_workspace, new_account
from tests.fixtures.db import SteppingClock
from wepush.server.domain import Keyset, PageRequest
from wepush.server.infra.db import SqlUnitOfWorkFactory

_COMPOSED = "caf\u00e9"
_DECOMPOSED = "cafe\u0301"


async def test_a_decomposed_filter_finds_composed_names_page_after_page(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    async with uow_factory() as uow:
        for name in [f"{_COMPOSED} crème", "cafe au lait", f"Grand {_COMPOSED.upper()}"]:
            await uow.accounts.add(new_account(workspace.id, db_clock.advance(), name=name))

    for needle in [_DECOMPOSED, _DECOMPOSED.upper(), _COMPOSED]:
        names: list[list[str]] = []
        after: Keyset | None = None
        while True:
            async with uow_factory(read_only=True) as uow:
                page = await uow.accounts.list_page(
                    workspace.id, PageRequest(limit=1, after=after), name=needle
                )
            names.append([a.name for a in page.items])
            if page.next_after is None:
                break
            after = page.next_after
        assert names == [[f"Grand {_COMPOSED.upper()}"], [f"{_COMPOSED} crème"]], needle


async def test_a_name_stored_decomposed_is_found_by_the_filter_written_the_same_way(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    legacy = f"{_DECOMPOSED} legacy"  # written straight to the table, as before names were composed
    async with uow_factory() as uow:
        await uow.accounts.add(new_account(workspace.id, db_clock.advance(), name=legacy))
        await uow.accounts.add(new_account(workspace.id, db_clock.advance(), name=f"{_COMPOSED} new"))

    async with uow_factory(read_only=True) as uow:
        decomposed = await uow.accounts.list_page(workspace.id, PageRequest(), name="CAFE\u0301")

    assert [a.name for a in decomposed.items] == [f"{_COMPOSED} new", legacy]
