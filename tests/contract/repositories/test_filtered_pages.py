"""Filtered keyset pages: every filter is part of the SQL, so a page reads at most ``limit + 1`` rows, is
full while more matches remain, and says exactly whether more exist. Names match case-insensitively
(Unicode, not only ASCII) and literally (``%``, ``_`` and ``\\`` are no wildcards) on both databases."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.contract.repositories._rows_read import count_rows_read
from tests.contract.repositories._world import add_workspace, build_world, new_account
from tests.fixtures.db import SteppingClock
from wepush.server.domain import (
    ApiToken,
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    Audience,
    AuditEvent,
    AuditOutcome,
    Keyset,
    Message,
    MessageRevision,
    PageRequest,
    Workspace,
    WorkspaceRole,
    hash_token,
    new_id,
)
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.db._text_match import folded
from wepush.server.infra.db.tables import account, api_token, artifact, audit_event


async def _add_accounts(
    uow_factory: SqlUnitOfWorkFactory, clock: SteppingClock, workspace: Workspace, names: list[str]
) -> list[str]:
    """One account per name, each a second newer than the one before; returns their ids."""
    ids = []
    async with uow_factory() as uow:
        for name in names:
            added = await uow.accounts.add(new_account(workspace.id, clock.advance(), name=name))
            ids.append(added.id)
    return ids


async def _account_names(uow_factory: SqlUnitOfWorkFactory, workspace: Workspace, needle: str) -> list[str]:
    async with uow_factory(read_only=True) as uow:
        page = await uow.accounts.list_page(workspace.id, PageRequest(limit=100), name=needle)
    assert not page.has_more
    return [a.name for a in page.items]


async def test_a_sparse_name_match_is_on_the_first_page_and_only_limit_plus_one_rows_are_read(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    [match] = await _add_accounts(uow_factory, db_clock, workspace, ["the x account"])
    await _add_accounts(uow_factory, db_clock, workspace, [f"billing-{n}" for n in range(30)])
    reads = count_rows_read(monkeypatch, account)

    async with uow_factory(read_only=True) as uow:
        page = await uow.accounts.list_page(workspace.id, PageRequest(limit=1), name="X")

    assert [a.id for a in page.items] == [match]
    assert not page.has_more
    assert reads.reads == [1]  # one query; the 30 newer non-matching rows never left the database


async def test_filtered_pages_stay_full_and_walk_every_match_once(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    names = [f"orders-{n}" if n % 10 == 0 else f"billing-{n}" for n in range(31)]
    ids = await _add_accounts(uow_factory, db_clock, workspace, names)
    expected = [i for i, name in reversed(list(zip(ids, names, strict=True))) if name.startswith("orders")]
    reads = count_rows_read(monkeypatch, account)

    seen: list[list[str]] = []
    more: list[bool] = []
    after: Keyset | None = None
    while True:
        async with uow_factory(read_only=True) as uow:
            page = await uow.accounts.list_page(
                workspace.id, PageRequest(limit=3, after=after), name="ORDERS"
            )
        seen.append([a.id for a in page.items])
        more.append(page.has_more)
        if page.next_after is None:
            break
        after = page.next_after

    assert seen == [expected[:3], expected[3:]]
    assert more == [True, False]
    assert reads.reads == [4, 1]


async def test_name_filters_match_percent_underscore_and_backslash_literally(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    await _add_accounts(
        uow_factory, db_clock, workspace, ["50% off", "500 off", "a_b", "axb", "back\\slash", "backslash"]
    )
    assert await _account_names(uow_factory, workspace, "%") == ["50% off"]
    assert await _account_names(uow_factory, workspace, "0% ") == ["50% off"]
    assert await _account_names(uow_factory, workspace, "_") == ["a_b"]
    assert await _account_names(uow_factory, workspace, "A_B") == ["a_b"]
    assert await _account_names(uow_factory, workspace, "\\") == ["back\\slash"]
    assert await _account_names(uow_factory, workspace, "k\\s") == ["back\\slash"]


async def test_name_filters_ignore_case_beyond_ascii(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    await _add_accounts(uow_factory, db_clock, workspace, ["Émile Zola", "emile", "ΣΟΦΊΑ", "İzmir", "Straße"])
    assert await _account_names(uow_factory, workspace, "émi") == ["Émile Zola"]
    assert await _account_names(uow_factory, workspace, "ÉMILE") == ["Émile Zola"]
    assert await _account_names(uow_factory, workspace, "EMI") == ["emile"]
    assert await _account_names(uow_factory, workspace, "σοφ") == ["ΣΟΦΊΑ"]
    assert await _account_names(uow_factory, workspace, "izm") == ["İzmir"]
    assert await _account_names(uow_factory, workspace, "STRAßE") == ["Straße"]


async def test_case_folding_is_the_same_function_on_both_databases(db_engine: AsyncEngine) -> None:
    # PostgreSQL's lower() on a UTF-8 database maps one code point at a time: no final sigma, İ -> i.
    async with db_engine.connect() as connection:
        lowered = await connection.scalar(select(folded(literal("ÉMILE ΣΑΣ İ ẞ ǅ Ω Ж"))))
    assert lowered == "émile σασ i ß ǆ ω ж"


async def test_messages_audiences_and_jobs_filter_by_name_and_provider_in_sql(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    world = await build_world(uow_factory, db_clock.now)
    ws = world.workspace.id
    async with uow_factory() as uow:
        for name, provider in [
            ("Réveil SMS", "wepush.sms"),
            ("réveil mail", "wepush.http"),
            ("news", "wepush.sms"),
        ]:
            now = db_clock.advance()
            message = Message(
                workspace_id=ws, name=name, provider_id=provider, created_at=now, updated_at=now
            )
            revision = MessageRevision.of(
                workspace_id=ws, message_id=message.id, revision=1, content={"path": "/"}, now=now
            )
            await uow.messages.add(message, revision)
            await uow.audiences.add(
                Audience(workspace_id=ws, name=f"{name} list", created_at=now, updated_at=now)
            )
            await uow.jobs.add(replace(world.job, id=new_id(), name=f"{name} job", created_at=now))

    async with uow_factory(read_only=True) as uow:
        messages = await uow.messages.list_page(
            ws, PageRequest(limit=1), name="RÉVEIL", provider_id="wepush.sms"
        )
        all_reveil = await uow.messages.list_page(ws, PageRequest(), name="réveil")
        by_provider = await uow.messages.list_page(ws, PageRequest(), provider_id="wepush.http")
        audiences = await uow.audiences.list_page(ws, PageRequest(limit=1), name="RÉVEIL")
        jobs = await uow.jobs.list_page(ws, PageRequest(limit=5), name="RÉVEIL SMS")
        accounts = await uow.accounts.list_page(ws, PageRequest(), provider_id="wepush.sms")

    assert [m.name for m in messages.items] == ["Réveil SMS"]
    assert not messages.has_more
    assert [m.name for m in all_reveil.items] == ["réveil mail", "Réveil SMS"]
    assert [m.name for m in by_provider.items] == ["réveil mail", world.message.name]
    assert [a.name for a in audiences.items] == ["réveil mail list"]
    assert audiences.has_more
    assert [j.name for j in jobs.items] == ["Réveil SMS job"]
    assert not jobs.has_more
    assert accounts.items == []


async def test_workspace_pages_filter_by_name_and_by_the_ids_a_caller_may_see(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock
) -> None:
    team_a = await add_workspace(uow_factory, db_clock.advance(), "Équipe A")
    team_b = await add_workspace(uow_factory, db_clock.advance(), "équipe b")
    other = await add_workspace(uow_factory, db_clock.advance(), "other")
    async with uow_factory(read_only=True) as uow:
        named = await uow.workspaces.list_page(PageRequest(limit=1), name="ÉQUIPE")
        rest = await uow.workspaces.list_page(PageRequest(limit=1, after=named.next_after), name="ÉQUIPE")
        visible = await uow.workspaces.list_page(
            PageRequest(limit=1), name="équipe", ids=[team_a.id, other.id]
        )
        only_ids = await uow.workspaces.list_page(PageRequest(), ids={other.id, team_b.id})
        none = await uow.workspaces.list_page(PageRequest(), ids=[])

    assert [w.id for w in named.items + rest.items] == [team_b.id, team_a.id]
    assert named.has_more
    assert not rest.has_more
    assert [w.id for w in visible.items] == [team_a.id]
    assert not visible.has_more
    assert [w.id for w in only_ids.items] == [other.id, team_b.id]
    assert none.items == []


async def test_token_pages_leave_out_system_admin_tokens_before_the_read(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)

    def token(name: str, *, system_admin: bool) -> ApiToken:
        now = db_clock.advance()
        return ApiToken(
            workspace_id=workspace.id,
            name=name,
            token_hash=hash_token(name),
            token_prefix=name[:8],
            role=WorkspaceRole.ADMIN,
            principal_id=f"principal-{name}",
            system_admin=system_admin,
            created_at=now,
            updated_at=now,
        )

    plain = token("plain", system_admin=False)
    admins = [token(f"admin-{n}", system_admin=True) for n in range(5)]
    async with uow_factory() as uow:
        for t in [plain, *admins]:
            await uow.api_tokens.add(t)
    reads = count_rows_read(monkeypatch, api_token)
    async with uow_factory(read_only=True) as uow:
        page = await uow.api_tokens.list_page(workspace.id, PageRequest(limit=1), system_admin=False)
        everything = await uow.api_tokens.list_page(workspace.id, PageRequest(limit=10))

    assert [t.id for t in page.items] == [plain.id]
    assert not page.has_more
    assert reads.reads[0] == 1
    assert len(everything.items) == 6


async def test_audit_pages_filter_by_actor_and_an_exclusive_lower_bound_in_sql(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)
    start = db_clock.now

    def event(minutes: int, actor_id: str) -> AuditEvent:
        return AuditEvent(
            workspace_id=workspace.id,
            occurred_at=start + timedelta(minutes=minutes),
            actor_type="USER",
            actor_id=actor_id,
            action="account.update",
            resource_type="ACCOUNT",
            resource_id="a1",
            outcome=AuditOutcome.SUCCESS,
            details={},
            created_at=start,
        )

    alice = [event(0, "alice"), event(1, "alice"), event(2, "alice")]
    async with uow_factory() as uow:
        for e in [*alice, *(event(3 + n, "bob") for n in range(30))]:
            await uow.audit.append(e)
    reads = count_rows_read(monkeypatch, audit_event)
    async with uow_factory(read_only=True) as uow:
        newest = await uow.audit.list_page(workspace.id, PageRequest(limit=1), actor_id="alice")
        after_first = await uow.audit.list_page(
            workspace.id, PageRequest(limit=5), actor_id="alice", occurred_after=start
        )
        since_first = await uow.audit.list_page(
            workspace.id, PageRequest(limit=5), actor_id="alice", since=start
        )

    assert [e.id for e in newest.items] == [alice[2].id]
    assert newest.has_more
    assert [e.id for e in after_first.items] == [alice[2].id, alice[1].id]  # the bound itself is excluded
    assert not after_first.has_more
    assert len(since_first.items) == 3
    assert reads.reads == [2, 2, 3]


async def test_artifact_pages_leave_out_other_states_and_types_before_the_read(
    uow_factory: SqlUnitOfWorkFactory, db_clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = await add_workspace(uow_factory, db_clock.now)

    def new_artifact(artifact_type: str, state: ArtifactState, owner_id: str = "run-1") -> Artifact:
        now = db_clock.advance()
        return Artifact(
            workspace_id=workspace.id,
            owner_type=ArtifactOwnerType.RUN,
            owner_id=owner_id,
            artifact_type=artifact_type,
            state=state,
            storage_key=f"key-{now.timestamp()}",
            content_type="application/x-ndjson",
            file_name="items.jsonl",
            created_at=now,
            updated_at=now,
        )

    shown = new_artifact("RUN_LOG", ArtifactState.READY)
    hidden = [
        new_artifact("DEBUG_DUMP", ArtifactState.READY),
        new_artifact("FAILED_ITEMS", ArtifactState.DELETING),
        new_artifact("FAILED_ITEMS", ArtifactState.DELETED),
        new_artifact("FAILED_ITEMS", ArtifactState.READY, owner_id="run-2"),
    ]
    later = new_artifact("FAILED_ITEMS", ArtifactState.UPLOADING)
    async with uow_factory() as uow:
        for a in [shown, *hidden, later]:
            await uow.artifacts.add(a)
    reads = count_rows_read(monkeypatch, artifact)
    states = {ArtifactState.UPLOADING, ArtifactState.READY, ArtifactState.FAILED}
    types = {"RUN_LOG", "FAILED_ITEMS"}
    async with uow_factory(read_only=True) as uow:
        first = await uow.artifacts.list_page(
            workspace.id,
            ArtifactOwnerType.RUN,
            "run-1",
            PageRequest(limit=1),
            states=states,
            artifact_types=types,
        )
        second = await uow.artifacts.list_page(
            workspace.id,
            ArtifactOwnerType.RUN,
            "run-1",
            PageRequest(limit=1, after=first.next_after),
            states=states,
            artifact_types=types,
        )
        any_type = await uow.artifacts.list_page(
            workspace.id, ArtifactOwnerType.RUN, "run-1", PageRequest(), states=states
        )

    assert [a.id for a in first.items + second.items] == [shown.id, later.id]  # oldest first
    assert first.has_more
    assert not second.has_more
    assert reads.reads[:2] == [2, 1]
    assert [a.id for a in any_type.items] == [shown.id, hidden[0].id, later.id]
