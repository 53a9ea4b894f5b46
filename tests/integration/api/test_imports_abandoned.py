"""An upload holds a lease on its import while the file arrives: a slow but live upload keeps it however
long the file takes, and an upload whose instance stopped answering is failed (audited, rows removed) by
any instance's check instead of leaving the import STAGING for 24 hours. Its receiver, if it was only
cut off and comes back, stops reading the file and names the state.

The lease's clock and its renewals are driven by hand; the database and the app are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.contract.repositories._world import accepted
from tests.fixtures.db import SteppingClock
from tests.helpers_app import RunningApp
from tests.integration.api._support import create_workspace, default_workspace, issue_token, service, uow
from tests.integration.api._support_content import create_audience, expect, start_import
from wepush.server.application._import_receiving import (
    CREDENTIAL_LOST,
    AbandonedUploads,
    ReceivingPolicy,
    UploadCredentialLost,
)
from wepush.server.application.auth import Principal, PrincipalType, Role
from wepush.server.application.imports import ImportService
from wepush.server.domain import (
    AudienceImport,
    ImportCounts,
    ImportState,
    ImportStateConflict,
    UnitOfWork,
    UnitOfWorkFactory,
    utc_now,
)

LEASE = ReceivingPolicy().lease
RENEWAL = ReceivingPolicy().renew_every


class Renewals:
    """The lease renewer's sleep, released one renewal at a time by :meth:`tick`."""

    def __init__(self) -> None:
        self._asleep = asyncio.Event()
        self._wake: asyncio.Future[None] | None = None
        self._renewer: asyncio.Task[Any] | None = None

    async def sleep(self, seconds: float) -> None:
        assert seconds == RENEWAL.total_seconds()
        self._renewer = asyncio.current_task()
        self._wake = asyncio.get_running_loop().create_future()
        self._asleep.set()
        await self._wake

    async def tick(self) -> None:
        """Let one renewal run; back once the renewer sleeps again or has stopped (its lease lost)."""
        await asyncio.wait_for(self._asleep.wait(), 10)
        self._asleep.clear()
        assert self._wake is not None
        assert self._renewer is not None
        self._wake.set_result(None)
        slept = asyncio.ensure_future(self._asleep.wait())
        await asyncio.wait({slept, self._renewer}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        slept.cancel()


class StallingFile:
    """A CSV sent in three parts, the last two only once the test lets them go."""

    def __init__(self) -> None:
        self.first_sent = asyncio.Event()
        self.release = asyncio.Event()
        self.parts_sent = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        self.parts_sent += 1
        yield b"mobile,name\n1380001,Ann\n"
        self.first_sent.set()
        await self.release.wait()
        for part in (b"1380002,Bo\n", b"1380003,Cy\n"):
            self.parts_sent += 1
            yield part


class DownOnce:
    """The app's units of work, except that the first one asked for after :meth:`cut` finds the
    database gone."""

    def __init__(self, real: UnitOfWorkFactory) -> None:
        self._real = real
        self._outage = False

    @property
    def concurrent(self) -> bool:
        return self._real.concurrent

    @property
    def writers_side_by_side(self) -> bool:
        return self._real.writers_side_by_side

    def reader_beside_writer(self) -> AbstractAsyncContextManager[tuple[UnitOfWork | None, UnitOfWork]]:
        return self._real.reader_beside_writer()

    def cut(self) -> None:
        self._outage = True

    def __call__(self, *, read_only: bool = False) -> UnitOfWork:
        if self._outage:
            self._outage = False
            raise ConnectionRefusedError("the database did not answer")
        return self._real(read_only=read_only)


def _imports(app: RunningApp, clock: SteppingClock, renewals: Renewals) -> ImportService:
    deps = app.runtime.deps
    assert deps is not None
    return ImportService(replace(deps, clock=clock, receiving=ReceivingPolicy(sleep=renewals.sleep)))


def _abandoned(app: RunningApp, clock: SteppingClock) -> AbandonedUploads:
    deps = app.runtime.deps
    assert deps is not None
    return AbandonedUploads(uow(app), clock, deps.auditor)


async def _stored(app: RunningApp, ws: str, import_id: str) -> AudienceImport:
    async with uow(app)(read_only=True) as reading:
        return await reading.audience_imports.get(ws, import_id)


async def _prepared(app: RunningApp) -> tuple[str, str, str, Principal]:
    ws = await default_workspace(app)
    audience = await create_audience(app, ws)
    started = await start_import(app, ws, audience["id"], itemIdField="mobile")
    operator = Principal(type=PrincipalType.USER, id="operator", roles={ws: Role.OPERATOR})
    return ws, audience["id"], started["id"], operator


async def _uploading(
    app: RunningApp, clock: SteppingClock, renewals: Renewals, file: StallingFile
) -> tuple[str, str, asyncio.Task[AudienceImport]]:
    """An upload of ``file`` under way, its first part received; the workspace and import ids."""
    ws, audience_id, import_id, operator = await _prepared(app)
    imports = _imports(app, clock, renewals)
    uploading = asyncio.create_task(imports.upload(operator, ws, audience_id, import_id, file.chunks()))
    await asyncio.wait_for(file.first_sent.wait(), 10)
    return ws, import_id, uploading


async def test_a_slow_upload_keeps_its_import_past_the_first_lease(tmp_path: Path) -> None:
    clock, renewals, file = SteppingClock(utc_now()), Renewals(), StallingFile()
    async with service(tmp_path) as app:
        ws, import_id, uploading = await _uploading(app, clock, renewals, file)
        claimed, claimed_at = await _stored(app, ws, import_id), clock.now

        renewed_at = clock.advance(LEASE - timedelta(seconds=30))
        await renewals.tick()
        renewed = await _stored(app, ws, import_id)
        clock.advance(timedelta(minutes=1))  # past the lease taken at the claim
        failed_by_check = await _abandoned(app, clock).sweep()
        file.release.set()
        staged = await asyncio.wait_for(uploading, 10)

    assert (claimed.state, claimed.receiving_until) == (ImportState.STAGING, claimed_at + LEASE)
    assert renewed.receiving_until == renewed_at + LEASE
    assert failed_by_check == 0
    assert staged.state is ImportState.STAGED
    assert staged.counts == ImportCounts(total_rows=3, accepted_rows=3)
    assert staged.receiving_until is None


async def test_an_upload_whose_instance_stopped_answering_is_failed_and_its_receiver_stops(
    tmp_path: Path,
) -> None:
    clock, renewals, file = SteppingClock(utc_now()), Renewals(), StallingFile()
    async with service(tmp_path) as app:
        ws, import_id, uploading = await _uploading(app, clock, renewals, file)
        # An earlier batch of this file, already in the database when the receiver went quiet.
        async with uow(app)() as writing:
            await writing.audience_imports.stage_rows(import_id, [accepted(2, "1380001")])

        clock.advance(LEASE)
        within_lease = await _abandoned(app, clock).sweep()
        clock.advance(timedelta(seconds=1))
        failed_by_check = await _abandoned(app, clock).sweep()
        given_up = await _stored(app, ws, import_id)
        async with uow(app)(read_only=True) as reading:
            rows_after_check = await reading.audience_imports.count_staged(import_id)

        # The receiver was only cut off: its next renewal finds the lease gone, and it reads no further.
        await renewals.tick()
        file.release.set()
        with pytest.raises(ImportStateConflict) as refused:
            await asyncio.wait_for(uploading, 10)
        async with uow(app)(read_only=True) as reading:
            rows_after_receiver = await reading.audience_imports.count_staged(import_id)
        final = await _stored(app, ws, import_id)
        again = await _abandoned(app, clock).sweep()

        events = expect(
            await app.client.get(
                f"/api/v1/workspaces/{ws}/audit-events", params={"resourceId": import_id}, headers=app.admin()
            ),
            200,
        )["items"]

    assert (within_lease, failed_by_check, again) == (0, 1, 0)
    assert given_up.state is ImportState.FAILED
    assert "abandoned" in (given_up.failure_reason or "")
    assert rows_after_check == rows_after_receiver == ImportCounts()
    assert file.parts_sent == 2  # the part that arrived after the lease was lost is the last one read
    assert refused.value.current_state == "FAILED"
    assert str(refused.value) == f"audience import {import_id} cannot accept content any more from FAILED"
    assert final == given_up
    abandoned = [e for e in events if e["details"].get("summary") == "the upload was abandoned"]
    assert [(e["actor"]["type"], e["outcome"], e["action"]) for e in abandoned] == [
        ("SYSTEM", "FAILED", "audience_import.stage")
    ]


async def test_a_renewal_the_database_did_not_answer_is_retried_at_the_next_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, renewals, file = SteppingClock(utc_now()), Renewals(), StallingFile()
    async with service(tmp_path) as app:
        ws, audience_id, import_id, operator = await _prepared(app)
        database = DownOnce(uow(app))
        deps = app.runtime.deps
        assert deps is not None
        imports = ImportService(
            replace(deps, clock=clock, uow=database, receiving=ReceivingPolicy(sleep=renewals.sleep))
        )
        uploading = asyncio.create_task(imports.upload(operator, ws, audience_id, import_id, file.chunks()))
        await asyncio.wait_for(file.first_sent.wait(), 10)
        database.cut()
        first_at = clock.advance(RENEWAL)
        await renewals.tick()
        missed = await _stored(app, ws, import_id)
        second_at = clock.advance(RENEWAL)
        await renewals.tick()
        renewed = await _stored(app, ws, import_id)
        file.release.set()
        staged = await asyncio.wait_for(uploading, 10)

    assert missed.receiving_until == first_at - RENEWAL + LEASE
    assert renewed.receiving_until == second_at + LEASE
    assert staged.state is ImportState.STAGED
    assert [
        r.getMessage() for r in caplog.records if getattr(r, "event", "") == "IMPORT_LEASE_RENEWAL_FAILED"
    ] == [f"the lease on upload {import_id} could not be renewed; retrying"]


async def test_every_instance_runs_the_check_from_its_start_until_it_stops(tmp_path: Path) -> None:
    async with service(tmp_path) as app:
        runtime = app.runtime
        running = runtime.abandoned_uploads
        assert running is not None
        alive = not running.done()
    assert alive
    assert running.cancelled()
    assert runtime.abandoned_uploads is None


async def test_an_upload_whose_token_is_revoked_stops_at_the_next_renewal(tmp_path: Path) -> None:
    """As an event stream stops at its next heartbeat: a revoked token's upload, which may run for hours,
    is failed at the next lease renewal instead of being staged."""
    clock, renewals, file = SteppingClock(utc_now()), Renewals(), StallingFile()
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        audience = await create_audience(app, ws)
        started = await start_import(app, ws, audience["id"], itemIdField="mobile")
        token_id, headers = await issue_token(app, ws, "OPERATOR")
        operator = await app.runtime.services.auth.authenticate_api_token(
            headers["Authorization"].removeprefix("Bearer ")
        )
        assert operator is not None
        imports = _imports(app, clock, renewals)
        uploading = asyncio.create_task(
            imports.upload(operator, ws, audience["id"], started["id"], file.chunks())
        )
        await asyncio.wait_for(file.first_sent.wait(), 10)
        clock.advance(RENEWAL)
        await renewals.tick()  # still valid: the upload goes on
        revoked = await app.client.delete(
            f"/api/v1/workspaces/{ws}/api-tokens/{token_id}", headers=app.admin()
        )
        clock.advance(RENEWAL)
        await renewals.tick()
        file.release.set()
        with pytest.raises(UploadCredentialLost):
            await asyncio.wait_for(uploading, 10)
        stored = await _stored(app, ws, started["id"])

    assert revoked.status_code == 204
    assert (stored.state, stored.failure_reason) == (ImportState.FAILED, CREDENTIAL_LOST)


@pytest.mark.parametrize("change", ["demoted to VIEWER", "removed from the workspace"])
async def test_an_upload_whose_token_loses_its_role_stops_at_the_next_renewal(
    tmp_path: Path, change: str
) -> None:
    """An ADMIN who demotes a token, or removes it from the workspace, is obeyed mid-upload too: the file
    a VIEWER could not have started sending is not staged because it was started before."""
    clock, renewals, file = SteppingClock(utc_now()), Renewals(), StallingFile()
    async with service(tmp_path) as app:
        ws = await default_workspace(app)
        team = await create_workspace(app, "team-b")
        audience = await create_audience(app, team)
        started = await start_import(app, team, audience["id"], itemIdField="mobile")
        # Issued in the default workspace and made OPERATOR of team-b through the members API.
        token_id, headers = await issue_token(app, ws, "VIEWER")
        member = f"/api/v1/workspaces/{team}/members/{token_id}"
        expect(await app.client.put(member, headers=app.admin(), json={"role": "OPERATOR"}), 200)
        operator = await app.runtime.services.auth.authenticate_api_token(
            headers["Authorization"].removeprefix("Bearer ")
        )
        assert operator is not None
        imports = _imports(app, clock, renewals)
        uploading = asyncio.create_task(
            imports.upload(operator, team, audience["id"], started["id"], file.chunks())
        )
        await asyncio.wait_for(file.first_sent.wait(), 10)
        clock.advance(RENEWAL)
        await renewals.tick()  # still an OPERATOR: the upload goes on
        if change == "demoted to VIEWER":
            changed = await app.client.put(member, headers=app.admin(), json={"role": "VIEWER"})
            assert changed.status_code == 200
        else:
            changed = await app.client.delete(member, headers=app.admin())
            assert changed.status_code == 204
        clock.advance(RENEWAL)
        await renewals.tick()
        file.release.set()
        with pytest.raises(UploadCredentialLost):
            await asyncio.wait_for(uploading, 10)
        stored = await _stored(app, team, started["id"])

    assert (stored.state, stored.failure_reason) == (ImportState.FAILED, CREDENTIAL_LOST)
