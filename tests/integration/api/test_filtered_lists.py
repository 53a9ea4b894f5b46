"""Filtered list endpoints on SQLite and PostgreSQL: the database applies every filter, so a page reads
``limit + 1`` rows at most, holds ``limit`` items while more matches exist, and ``hasMore`` is exact.
Name filters ignore case beyond ASCII and take ``%``, ``_`` and ``\\`` literally."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.contract.repositories._rows_read import count_rows_read
from tests.contract.repositories._world import new_account
from tests.helpers_app import RunningApp
from tests.integration.api import _support_runs
from tests.integration.api._support import (
    API,
    accounts_url,
    create_account,
    create_workspace,
    default_workspace,
    http_account,
    service,
    uow,
)
from tests.integration.api._support_content import expect, ws_url
from wepush.server.domain import AuditEvent, AuditOutcome, utc_now
from wepush.server.infra.db.tables import account, audit_event


async def _names(app: RunningApp, url: str, needle: str) -> list[str]:
    body = expect(await app.client.get(url, headers=app.admin(), params={"name": needle, "limit": 100}), 200)
    assert body["page"]["hasMore"] is False
    return [item["name"] for item in body["items"]]


async def _walk(app: RunningApp, url: str, params: dict[str, Any]) -> list[tuple[list[str], bool]]:
    """Every page of a listing as ``(ids, hasMore)``, following the cursors."""
    pages: list[tuple[list[str], bool]] = []
    query = dict(params)
    while True:
        body = expect(await app.client.get(url, headers=app.admin(), params=query), 200)
        pages.append(([item["id"] for item in body["items"]], body["page"]["hasMore"]))
        if not body["page"]["hasMore"]:
            return pages
        query["cursor"] = body["page"]["nextCursor"]


async def test_a_lone_name_match_behind_thirty_others_is_the_whole_first_page(
    tmp_path: Path, database_backend: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        start = utc_now()
        match = new_account(ws, start - timedelta(minutes=1), name="Xavier")
        async with uow(app)() as tx:
            await tx.accounts.add(match)
            for n in range(30):
                await tx.accounts.add(new_account(ws, start + timedelta(seconds=n), name=f"billing-{n}"))
        reads = count_rows_read(monkeypatch, account)
        pages = await _walk(app, accounts_url(ws), {"name": "x", "limit": 1})

    assert pages == [([match.id], False)]
    assert reads.reads == [1]  # the one match; the 30 newer accounts were never read


async def test_sparse_matches_fill_every_page_but_the_last(
    tmp_path: Path, database_backend: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        start = utc_now()
        accounts = [
            new_account(
                ws, start + timedelta(seconds=n), name=f"orders-{n}" if n % 7 == 0 else f"billing-{n}"
            )
            for n in range(30)
        ]
        async with uow(app)() as tx:
            for a in accounts:
                await tx.accounts.add(a)
        reads = count_rows_read(monkeypatch, account)
        pages = await _walk(app, accounts_url(ws), {"name": "ORDERS", "limit": 2})

    newest_first = [a.id for a in reversed(accounts) if a.name.startswith("orders")]  # 28, 21, 14, 7, 0
    assert pages == [(newest_first[0:2], True), (newest_first[2:4], True), (newest_first[4:], False)]
    assert reads.reads == [3, 3, 1]


async def test_names_match_wildcards_literally_and_letters_in_any_case(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        for name in ("50% off", "500 off", "a_b", "axb", "Émile", "emile"):
            await create_account(app, ws, http_account(name))
        for name in ("Réveil", "reveil"):
            expect(
                await app.client.post(ws_url(ws, "audiences"), headers=app.admin(), json={"name": name}), 201
            )
        await create_workspace(app, "Équipe Ünïcode")

        assert await _names(app, accounts_url(ws), "%") == ["50% off"]
        assert await _names(app, accounts_url(ws), "_") == ["a_b"]
        assert await _names(app, accounts_url(ws), "émi") == ["Émile"]
        assert await _names(app, accounts_url(ws), "ÉMI") == ["Émile"]
        assert await _names(app, ws_url(ws, "audiences"), "RÉV") == ["Réveil"]
        assert await _names(app, f"{API}/workspaces", "équipe ünï") == ["Équipe Ünïcode"]


async def test_audit_events_of_one_actor_after_an_instant_fill_the_first_page(
    tmp_path: Path, database_backend: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        start = utc_now() - timedelta(hours=1)

        def event(minutes: int, actor_id: str) -> AuditEvent:
            return AuditEvent(
                workspace_id=ws,
                occurred_at=start + timedelta(minutes=minutes),
                actor_type="USER",
                actor_id=actor_id,
                action="account.update",
                resource_type="ACCOUNT",
                resource_id="a1",
                outcome=AuditOutcome.SUCCESS,
                created_at=start,
            )

        alice = [event(0, "alice"), event(1, "alice")]
        async with uow(app)() as tx:
            for e in [*alice, *(event(2 + n, "bob") for n in range(30))]:
                await tx.audit.append(e)
        reads = count_rows_read(monkeypatch, audit_event)
        pages = await _walk(
            app,
            f"{API}/workspaces/{ws}/audit-events",
            {"actorId": "alice", "occurredAfter": start.isoformat(), "limit": 1},
        )

    assert pages == [([alice[1].id], False)]  # occurredAfter excludes the event at ``start`` itself
    assert reads.reads == [1]


async def test_run_artifact_pages_skip_types_the_contract_does_not_name(tmp_path: Path) -> None:
    async with _support_runs.service(tmp_path) as app:
        world = await _support_runs.seed_world(app)
        run_id = await _support_runs.start_confirmed(app, world)
        for _ in range(3):
            await _support_runs.add_artifact(app, world, run_id, b"{}\n", artifact_type="DEBUG_DUMP")
        log = await _support_runs.add_artifact(
            app, world, run_id, b"{}\n", artifact_type="RUN_LOG", file_name="logs.jsonl"
        )
        pages = await _walk(app, world.runs_url(run_id, "artifacts"), {"limit": 1})

    assert pages == [([log.id], False)]
