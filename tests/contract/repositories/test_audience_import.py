"""Audience imports: batched staging, duplicate marking, snapshot commit via INSERT … SELECT."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from tests.contract.repositories._world import accepted, add_workspace, commit_audience, new_import, rejected
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    Audience,
    ImportCounts,
    ImportState,
    ImportStateConflict,
    PageRequest,
    StagedRow,
    StagedRowStatus,
    VersionConflict,
    canonical_json,
    staged_record,
)
from wepush.server.infra.db import DUPLICATE_ITEM_KEY, SqlUnitOfWorkFactory


async def _audience(uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock) -> Audience:
    workspace = await add_workspace(uow_factory, clock.now)
    audience = Audience(
        workspace_id=workspace.id, name="customers", created_at=clock.now, updated_at=clock.now
    )
    async with uow_factory() as uow:
        await uow.audiences.add(audience)
    return audience


async def test_staged_batches_commit_into_a_snapshot_that_keeps_only_first_occurrences(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    audience_import = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile", "name"])
    batches = [
        [accepted(1, "a", name="Ann"), accepted(2, "b", name="Bo"), rejected(3)],
        [accepted(4, "a", name="Ann again"), accepted(5, "c", name="Cy")],
        [accepted(6, "b", name="Bo again"), accepted(7, "d", name="Di"), accepted(8, "a", name="third")],
    ]
    async with uow_factory() as uow:
        await uow.audience_imports.add(audience_import)
        inserted = [await uow.audience_imports.stage_rows(audience_import.id, batch) for batch in batches]
        marked = await uow.audience_imports.mark_duplicates(audience_import.id)
        marked_again = await uow.audience_imports.mark_duplicates(audience_import.id)
        counts = await uow.audience_imports.count_staged(audience_import.id)
        staged = await uow.audience_imports.update(
            replace(audience_import, state=ImportState.STAGED, counts=counts)
        )
        duplicates = await uow.audience_imports.list_staged(
            audience_import.id, PageRequest(limit=20), statuses=[StagedRowStatus.DUPLICATE]
        )

    assert inserted == [3, 2, 3]
    assert (marked, marked_again) == (3, 0)
    assert counts == ImportCounts(total_rows=8, accepted_rows=4, rejected_rows=1, duplicate_rows=3)
    assert [(r.line_number, r.item_key, r.reason_code) for r in duplicates.items] == [
        (4, "a", DUPLICATE_ITEM_KEY),
        (6, "b", DUPLICATE_ITEM_KEY),
        (8, "a", DUPLICATE_ITEM_KEY),
    ]

    db_clock.advance()
    async with uow_factory() as uow:
        committed = await uow.audience_imports.commit(audience, staged)
    snapshot = committed.snapshot

    async with uow_factory(read_only=True) as uow:
        first = await uow.audiences.list_recipients(snapshot.id, PageRequest(limit=3))
        second = await uow.audiences.list_recipients(
            snapshot.id, PageRequest(limit=3, after=first.next_after)
        )
        stored_snapshot = await uow.audiences.get_snapshot(audience.workspace_id, snapshot.id)
        stored_import = await uow.audience_imports.get(audience.workspace_id, audience_import.id)
        keys = await uow.audiences.recipient_item_keys(snapshot.id, [4, 2, 9, 2])
        no_keys = await uow.audiences.recipient_item_keys(snapshot.id, [])
    assert (keys, no_keys) == ({2: "b", 4: "d"}, {})  # a sequence beyond the snapshot has none
    recipients = first.items + second.items
    assert [(r.sequence, r.item_key, r.fields["name"]) for r in recipients] == [
        (1, "a", "Ann"),
        (2, "b", "Bo"),
        (3, "c", "Cy"),
        (4, "d", "Di"),
    ]
    assert first.has_more
    assert not second.has_more
    expected = hashlib.sha256(
        "".join(f"{r.item_key}\t{canonical_json(r.fields)}\n" for r in recipients).encode()
    ).hexdigest()
    assert stored_snapshot == snapshot
    assert (snapshot.revision, snapshot.recipient_count, snapshot.checksum) == (1, 4, expected)
    assert snapshot.fields == ["mobile", "name"]
    assert snapshot.source_import_id == audience_import.id
    assert committed.audience.latest_snapshot_id == snapshot.id
    assert (committed.audience.latest_revision, committed.audience.recipient_count) == (1, 4)
    assert committed.audience.version == audience.version + 1
    assert stored_import.state is ImportState.COMMITTED
    assert stored_import.snapshot_id == snapshot.id


async def test_commit_rechecks_the_audience_version_and_leaves_nothing_behind(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    audience_import = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"])
    async with uow_factory() as uow:
        await uow.audience_imports.add(replace(audience_import, state=ImportState.STAGED))
        await uow.audience_imports.stage_rows(audience_import.id, [accepted(1, "a")])
        await uow.audiences.update(replace(audience, description="edited meanwhile"))

    with pytest.raises(VersionConflict):
        async with uow_factory() as uow:
            await uow.audience_imports.commit(audience, replace(audience_import, state=ImportState.STAGED))

    async with uow_factory() as uow:
        current = await uow.audiences.get(audience.workspace_id, audience.id)
        still_staged = await uow.audience_imports.get(audience.workspace_id, audience_import.id)
        snapshots = await uow.audiences.list_snapshots(audience.workspace_id, audience.id, PageRequest())
    assert current.latest_snapshot_id is None
    assert still_staged.state is ImportState.STAGED
    assert snapshots.items == []


async def test_an_import_commits_once_and_the_next_commit_gets_the_next_revision(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    first_import = replace(
        new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"]), state=ImportState.STAGED
    )
    async with uow_factory() as uow:
        await uow.audience_imports.add(first_import)
        await uow.audience_imports.stage_rows(first_import.id, [accepted(1, "a"), accepted(2, "b")])
        first = await uow.audience_imports.commit(audience, first_import)

    with pytest.raises(ImportStateConflict) as conflict:
        async with uow_factory() as uow:
            await uow.audience_imports.commit(first.audience, first.audience_import)
    assert conflict.value.current_state == ImportState.COMMITTED.value

    second_import = replace(
        new_import(audience.workspace_id, audience.id, db_clock.advance(), ["mobile"]),
        state=ImportState.STAGED,
    )
    async with uow_factory() as uow:
        await uow.audience_imports.add(second_import)
        await uow.audience_imports.stage_rows(second_import.id, [accepted(1, "z")])
        second = await uow.audience_imports.commit(first.audience, second_import)
        discarded = await uow.audience_imports.discard_staging(first_import.id)
        snapshots = await uow.audiences.list_snapshots(audience.workspace_id, audience.id, PageRequest())
        old_recipients = await uow.audiences.list_recipients(first.snapshot.id, PageRequest())

    assert second.snapshot.revision == 2
    assert second.audience.recipient_count == 1
    assert discarded == 2
    assert [s.revision for s in snapshots.items] == [1, 2]
    assert [r.item_key for r in old_recipients.items] == ["a", "b"]


async def test_a_large_import_is_staged_in_batches_and_copied_in_order(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    audience_import = replace(
        new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"]), state=ImportState.STAGED
    )
    total, batch_size = 2500, 1000
    async with uow_factory() as uow:
        await uow.audience_imports.add(audience_import)
        for start in range(1, total + 1, batch_size):
            batch = [accepted(n, f"k{n:05d}") for n in range(start, min(start + batch_size, total + 1))]
            await uow.audience_imports.stage_rows(audience_import.id, batch)
        committed = await uow.audience_imports.commit(audience, audience_import)
        last_page = await uow.audiences.list_recipients(
            committed.snapshot.id, PageRequest(limit=5, after=total - 5)
        )
    assert committed.snapshot.recipient_count == total
    assert [(r.sequence, r.item_key) for r in last_page.items] == [
        (n, f"k{n:05d}") for n in range(total - 4, total + 1)
    ]


@pytest.mark.parametrize("among", [None, {"a", "b", "zz"}, {"a", "b", "c", "d"}])
async def test_duplicates_ranked_among_suspect_keys_are_the_same_as_among_all(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, among: set[str] | None
) -> None:
    audience = await _audience(uow_factory, db_clock)
    audience_import = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"])
    rows = [accepted(1, "a"), accepted(2, "b"), accepted(3, "a"), accepted(4, "c")]
    rows += [accepted(5, "b"), rejected(6), accepted(7, "a"), accepted(8, "d")]
    async with uow_factory() as uow:
        await uow.audience_imports.add(audience_import)
        await uow.audience_imports.stage_rows(audience_import.id, rows)
        marked = await uow.audience_imports.mark_duplicates(audience_import.id, among=among)
        duplicates = await uow.audience_imports.list_staged(
            audience_import.id, PageRequest(limit=20), statuses=[StagedRowStatus.DUPLICATE]
        )

    assert marked == 3
    assert [r.line_number for r in duplicates.items] == [3, 5, 7]


async def test_no_suspect_keys_means_no_duplicates_to_mark(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    audience = await _audience(uow_factory, db_clock)
    audience_import = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile"])
    async with uow_factory() as uow:
        await uow.audience_imports.add(audience_import)
        await uow.audience_imports.stage_rows(audience_import.id, [accepted(1, "a"), accepted(2, "b")])
        assert await uow.audience_imports.mark_duplicates(audience_import.id, among=set()) == 0


async def test_the_checksum_hashes_the_stored_text_of_awkward_values_exactly(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    # PostgreSQL streams the checksum's lines with COPY, whose text format escapes backslashes and
    # control characters: the hash must still be over the values themselves.
    audience = await _audience(uow_factory, db_clock)
    awkward = [
        accepted(1, "back\\slash", name="C:\\temp\\new"),
        accepted(2, "tab\tkey", name="a\tb"),
        accepted(3, "line\nkey", name="first\nsecond\r\nthird"),
        accepted(4, "\\", name="\\\\n is not a newline"),
        accepted(5, "ctl", name="\b\f\v\x01 end"),
        accepted(6, "ünï", name="名字 🎉", note='"quoted" \\"'),
    ]
    _, snapshot = await commit_audience(uow_factory, audience, awkward, db_clock.now)
    expected = hashlib.sha256(
        "".join(f"{r.item_key}\t{canonical_json(r.fields)}\n" for r in awkward).encode()
    ).hexdigest()
    assert (snapshot.recipient_count, snapshot.checksum) == (6, expected)


@pytest.mark.parametrize("accepted_rows", [999, 1000, 2345])
async def test_a_bulk_batch_is_staged_as_it_was_given_whatever_its_size(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, accepted_rows: int
) -> None:
    # SQLite binds whole statements of accepted rows and sends the rest as JSON: a batch on either side of
    # a statement's size, with awkward text and other rows among the accepted ones, must read back whole.
    audience = await _audience(uow_factory, db_clock)
    audience_import = new_import(audience.workspace_id, audience.id, db_clock.now, ["mobile", "name"])
    awkward = ["plain", 'quote " and \\ backslash', "tab\tnew\nline", "名字 🎉", "", "\x01\x7f"]
    rows: list[StagedRow] = []
    for n in range(1, accepted_rows + 1):
        name = awkward[n % len(awkward)]
        rows.append(
            StagedRow(
                line_number=2 * n,
                status=StagedRowStatus.ACCEPTED,
                item_key=f"k{n}",
                fields={"mobile": f"k{n}", "name": name},
            )
        )
        if n % 400 == 0:
            rows.append(rejected(2 * n + 1))
    async with uow_factory() as uow:
        await uow.audience_imports.add(audience_import)
        staged = await uow.audience_imports.stage_records(
            [staged_record(audience_import.id, r) for r in rows]
        )
    read: list[StagedRow] = []
    after: int | None = None
    async with uow_factory(read_only=True) as uow:
        while True:
            page = await uow.audience_imports.list_staged(
                audience_import.id, PageRequest(limit=100, after=after)
            )
            read += page.items
            if not page.has_more:
                break
            after = page.next_after
    assert staged == len(rows)
    assert read == rows
