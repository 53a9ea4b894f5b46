"""Two first requests with one Idempotency-Key at the same time (a client retrying while its first try is
still running) get the same answer: one creates, the other replays it. On PostgreSQL both pass the key's
lookup before either commits, so the loser fails on a unique key, version or state and must run again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.helpers_app import RunningApp
from tests.integration.api._support import accounts_url, default_workspace, http_account, service
from tests.integration.api._support_content import (
    HTTP_CONTENT,
    create_audience,
    create_message,
    expect,
    import_url,
    job_body,
    job_world,
    start_import,
    upload,
    ws_url,
)
from tests.integration.api._support_runs import confirm, seed_world, start
from tests.integration.api._support_runs import service as runs_service
from wepush.server.domain import IdempotencyRecord
from wepush.server.infra.db import SqlIdempotencyRepository

#: Enough simultaneous copies that, without the second run, some lose the race on PostgreSQL every time.
COPIES = 4


async def _together(app: RunningApp, url: str, body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    headers = {**app.admin(), "Idempotency-Key": key}
    answers = await asyncio.gather(*(app.client.post(url, headers=headers, json=body) for _ in range(COPIES)))
    return [expect(answer, 201) for answer in answers]


def _one_answer(answers: list[dict[str, Any]]) -> dict[str, Any]:
    assert all(answer == answers[0] for answer in answers), answers
    return answers[0]


async def test_simultaneous_first_requests_with_one_key_get_one_resource(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        ws = await default_workspace(app)
        account = _one_answer(await _together(app, accounts_url(ws), http_account("raced"), "account-1"))
        listed = expect(await app.client.get(accounts_url(ws), headers=app.admin()), 200)
        assert [a["id"] for a in listed["items"]].count(account["id"]) == 1
        assert len(listed["items"]) == 1

        message_body = {"name": "raced", "providerId": "wepush.http", "content": HTTP_CONTENT}
        message = _one_answer(await _together(app, ws_url(ws, "messages"), message_body, "message-1"))
        revision = _one_answer(
            await _together(
                app,
                ws_url(ws, "messages", message["id"], "revisions"),
                {"content": {**HTTP_CONTENT, "path": "/again"}, "basedOnRevision": 1},
                "revision-1",
            )
        )
        assert revision["revision"] == 2

        audience = _one_answer(await _together(app, ws_url(ws, "audiences"), {"name": "raced"}, "audience-1"))
        settings = {"format": "CSV", "fieldMapping": {"mobile": "mobile", "name": "name"}}
        started = _one_answer(await _together(app, import_url(ws, audience["id"]), settings, "import-1"))
        expect(await upload(app, ws, audience["id"], started["id"], b"mobile,name\n1380001,Ann\n"), 200)
        snapshot = _one_answer(
            await _together(
                app,
                import_url(ws, audience["id"], started["id"], "commit"),
                {"version": audience["version"]},
                "commit-1",
            )
        )
        assert snapshot["recipientCount"] == 1

        world = await job_world(app, ws)
        job = _one_answer(await _together(app, ws_url(ws, "jobs"), job_body(world, "raced"), "job-1"))
        jobs = expect(await app.client.get(ws_url(ws, "jobs"), headers=app.admin()), 200)
        assert [j["id"] for j in jobs["items"]] == [job["id"]]

        workspace = _one_answer(await _together(app, "/api/v1/workspaces", {"name": "raced"}, "workspace-1"))
        assert workspace["name"] == "raced"
        assert (await create_message(app, ws, "after"))["name"] == "after"
        assert (await create_audience(app, ws, "after"))["name"] == "after"
        assert (await start_import(app, ws, audience["id"]))["state"] == "CREATED"


async def test_simultaneous_starts_with_one_key_and_one_confirmation_start_one_run(
    tmp_path: Path, database_backend: str, database_url: str
) -> None:
    async with runs_service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        world = await seed_world(app)
        token = (await confirm(app, world))["confirmationToken"]
        answers = await asyncio.gather(
            *(start(app, world, {"confirmationToken": token}, key="start-1") for _ in range(COPIES))
        )
        runs = expect(await app.client.get(world.runs_url(), headers=app.admin()), 200)

    started = _one_answer([expect(answer, 202) for answer in answers])
    assert [run["id"] for run in runs["items"]] == [started["id"]]


async def test_a_start_that_looked_up_its_key_before_the_winner_committed_replays_the_winner(
    tmp_path: Path, database_backend: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL the loser's key lookup can run before the winner commits and its look for the
    # confirmation's run after: it finds the run its own first try started. That is the same request,
    # to be replayed, not a second use of the confirmation (409 CONFIRMATION_INVALID).
    async with runs_service(
        tmp_path, WEPUSH_DATABASE_TYPE=database_backend, WEPUSH_DATABASE_URL=database_url
    ) as app:
        world = await seed_world(app)
        body = {"confirmationToken": (await confirm(app, world))["confirmationToken"]}
        first = expect(await start(app, world, body, key="start-1"), 202)
        found = SqlIdempotencyRepository.find
        blind = [True]

        async def before_the_commit(self: SqlIdempotencyRepository, *args: Any) -> IdempotencyRecord | None:
            if blind:
                blind.clear()
                return None
            return await found(self, *args)

        monkeypatch.setattr(SqlIdempotencyRepository, "find", before_the_commit)
        again = await start(app, world, body, key="start-1")
        other_key = await start(app, world, body, key="start-2")
        runs = expect(await app.client.get(world.runs_url(), headers=app.admin()), 200)

    assert expect(again, 202) == first
    assert not blind
    assert (other_key.status_code, other_key.json()["code"]) == (409, "CONFIRMATION_INVALID")
    assert [run["id"] for run in runs["items"]] == [first["id"]]
