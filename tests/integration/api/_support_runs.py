"""Set-up for the Run API tests: a seeded world (account, message, audience snapshot, job), runs moved
through their states the way the executor would, a controllable clock, and a loopback HTTP server for
the streaming tests.

Resources are written through the repositories so these tests depend on nothing but the Run API itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.contract.repositories._world import accepted, commit_audience
from tests.helpers_app import RunningApp, running_app, standalone_config
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.http import HttpProviderFactory
from wepush.server.application.execution import item_id_for, normalize_policies
from wepush.server.application.runs import RunService
from wepush.server.composition._service import build_service_app
from wepush.server.config import ServiceConfig
from wepush.server.domain import (
    Account,
    Artifact,
    ArtifactOwnerType,
    ArtifactState,
    Audience,
    AudienceSnapshot,
    ItemResult,
    ItemState,
    Job,
    Message,
    MessageRevision,
    Run,
    RunCounts,
    RunEventDraft,
    RunState,
    UnitOfWorkFactory,
    new_id,
    utc_now,
)

API = "/api/v1"
QUIET = {"WEPUSH_AGENT_EMBEDDED_ENABLED": "false"}
"""Runs stay where the test puts them: no executor claims them."""


def run_catalog() -> ProviderCatalog:
    return ProviderCatalog.from_factories(
        [FakeProviderFactory(), HttpProviderFactory(allow_loopback_for_tests=True)]
    )


def config_for(tmp_path: Path, **env: str) -> ServiceConfig:
    return standalone_config(tmp_path, **{**QUIET, **env})


@contextlib.asynccontextmanager
async def service(tmp_path: Path, **env: str) -> AsyncIterator[RunningApp]:
    async with running_app(config_for(tmp_path, **env), catalog=run_catalog()) as app:
        yield app


def uow(app: RunningApp) -> UnitOfWorkFactory:
    factory = app.runtime.uow
    assert factory is not None
    return factory


class ManualClock:
    """A clock a test moves by hand, starting at the real now (tokens carry absolute expiries)."""

    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def use_clock(app: RunningApp, clock: ManualClock) -> None:
    """Rebuild the Run use cases on ``clock`` (everything else keeps the system clock)."""
    started = app.runtime.services.require_started()
    current = started.resources.runs
    deps = app.runtime.deps
    assert deps is not None
    started.resources.runs = RunService(replace(deps, clock=clock), current._ports)


@dataclass(frozen=True)
class World:
    workspace_id: str
    account: Account
    message: Message
    audience: Audience
    snapshot: AudienceSnapshot
    job: Job

    def job_url(self, *rest: str) -> str:
        return "/".join([f"{API}/workspaces/{self.workspace_id}/jobs/{self.job.id}", *rest])

    def runs_url(self, *rest: str) -> str:
        return "/".join([f"{API}/workspaces/{self.workspace_id}/runs", *rest])


RECIPIENTS = ("13800000001", "13800000002", "13800000003", "13800000004")


async def default_workspace_id(app: RunningApp) -> str:
    async with uow(app)(read_only=True) as unit:
        workspace = await unit.workspaces.find_by_name("default")
    assert workspace is not None
    return workspace.id


async def seed_world(
    app: RunningApp,
    *,
    policies: Mapping[str, Any] | None = None,
    recipients: tuple[str, ...] = RECIPIENTS,
    provider_id: str = "wepush.fake",
    account_config: Mapping[str, Any] | None = None,
    message_content: Mapping[str, Any] | None = None,
) -> World:
    factory = uow(app)
    workspace_id = await default_workspace_id(app)
    now = utc_now()
    suffix = new_id()[-8:]
    account = Account(
        workspace_id=workspace_id,
        name=f"{provider_id}-{suffix}",
        provider_id=provider_id,
        provider_version="1.0.0",
        config=dict(account_config or {"name": "fake"}),
        schema_version="1",
        created_at=now,
        updated_at=now,
    )
    message = Message(
        workspace_id=workspace_id,
        name=f"greeting-{suffix}",
        provider_id=provider_id,
        created_at=now,
        updated_at=now,
    )
    revision = MessageRevision.of(
        workspace_id=workspace_id,
        message_id=message.id,
        revision=1,
        content=dict(message_content or {"text": "hello {name}"}),
        now=now,
    )
    audience = Audience(workspace_id=workspace_id, name=f"customers-{suffix}", created_at=now, updated_at=now)
    async with factory() as unit:
        await unit.accounts.add(account)
        await unit.messages.add(message, revision)
        await unit.audiences.add(audience)
    audience, snapshot = await commit_audience(
        factory, audience, [accepted(i + 1, key, name=f"n{i + 1}") for i, key in enumerate(recipients)], now
    )
    job = Job(
        workspace_id=workspace_id,
        name=f"weekly-{suffix}",
        account_id=account.id,
        message_id=message.id,
        message_revision=1,
        audience_snapshot_id=snapshot.id,
        policies=normalize_policies(policies or {"concurrency": {"min": 1, "max": 10, "target": 4}}),
        created_at=now,
        updated_at=now,
    )
    async with factory() as unit:
        await unit.jobs.add(job)
    return World(workspace_id, account, message, audience, snapshot, job)


async def confirm(app: RunningApp, world: World, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = await app.client.post(world.job_url("run-confirmation"), headers=app.admin(), json=body or {})
    assert response.status_code == 200, response.text
    confirmation: dict[str, Any] = response.json()
    return confirmation


async def start(
    app: RunningApp,
    world: World,
    body: dict[str, Any],
    *,
    key: str = "key-1",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return await app.client.post(
        world.job_url("runs"), headers={**(headers or app.admin()), "Idempotency-Key": key}, json=body
    )


async def start_confirmed(app: RunningApp, world: World, *, key: str = "key-1", **extra: Any) -> str:
    """A real run, confirmed and started; returns its id."""
    token = (await confirm(app, world))["confirmationToken"]
    response = await start(app, world, {"confirmationToken": token, **extra}, key=key)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def load_run(app: RunningApp, world: World, run_id: str) -> Run:
    async with uow(app)(read_only=True) as unit:
        return await unit.runs.get(world.workspace_id, run_id)


async def until_ended(app: RunningApp, world: World, run_id: str, *, within: float = 30.0) -> Run:
    """The run once it reached a terminal state (a cancelled PENDING run is ended by the Service's own
    pass, moments after the cancel answered)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not (run := await load_run(app, world, run_id)).state.is_terminal:
        if loop.time() > deadline:
            raise AssertionError(f"run {run_id} still {run.state.value} after {within} s")
        await asyncio.sleep(0.05)
    return run


async def move_run(
    app: RunningApp, world: World, run_id: str, *targets: RunState, reason: str | None = None
) -> Run:
    """Walk a run through states as the executor would (each step a conditional transition)."""
    run = await load_run(app, world, run_id)
    for target in targets:
        async with uow(app)() as unit:
            run = await unit.runs.transition(
                world.workspace_id, run_id, expected_version=run.version, target=target, reason=reason
            )
    return run


async def append_events(
    app: RunningApp, world: World, run_id: str, *types: str, data: dict[str, Any] | None = None
) -> list[int]:
    async with uow(app)() as unit:
        stored = await unit.run_events.append(
            world.workspace_id,
            run_id,
            [RunEventDraft(type=t, occurred_at=utc_now(), data=dict(data or {})) for t in types],
        )
    return [event.sequence for event in stored]


def item_of(world: World, run_id: str, recipient: str) -> str:
    """The item id the executor gives ``recipient`` in ``run_id``."""
    return item_id_for(run_id, world.snapshot.id, RECIPIENTS.index(recipient) + 1)


async def finish_with_outcomes(
    app: RunningApp, world: World, run_id: str, outcomes: Mapping[str, ItemState]
) -> Run:
    """Record item outcomes (keyed by recipient) and end the run PARTIAL, as an executor would."""
    results = [
        ItemResult(
            item_id=item_of(world, run_id, key),
            sequence=RECIPIENTS.index(key) + 1,
            state=state,
            attempt=1,
            finished_at=utc_now(),
        )
        for key, state in outcomes.items()
    ]
    counts = RunCounts(
        total=len(results),
        succeeded=sum(1 for s in outcomes.values() if s is ItemState.SUCCEEDED),
        failed=sum(1 for s in outcomes.values() if s is ItemState.FAILED),
        unknown=sum(1 for s in outcomes.values() if s is ItemState.UNKNOWN),
        unsent=sum(1 for s in outcomes.values() if s is ItemState.UNSENT),
        skipped=sum(1 for s in outcomes.values() if s is ItemState.SKIPPED),
    )
    await move_run(app, world, run_id, RunState.LEASED, RunState.RUNNING)
    async with uow(app)() as unit:
        await unit.run_items.record_results(world.workspace_id, run_id, results)
        await unit.runs.record_progress(world.workspace_id, run_id, counts=counts, current_concurrency=0)
    return await move_run(app, world, run_id, RunState.PARTIAL)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def loopback_service(tmp_path: Path, **env: str) -> AsyncIterator[RunningApp]:
    """The real app under uvicorn on 127.0.0.1, in this event loop, with a client over real HTTP:
    streaming responses arrive chunk by chunk (httpx's in-process ASGI transport buffers a response)."""
    config = config_for(tmp_path, **env)
    app, runtime = build_service_app(config, catalog=run_catalog())
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while not server.started:
            if task.done():
                task.result()
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("uvicorn did not start")
            await asyncio.sleep(0.02)
        token = config.security.bootstrap_token_file.read_text(encoding="utf-8").strip()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as client:
            yield RunningApp(client, runtime, token)
    finally:
        server.should_exit = True
        await task


def event_hint(app: RunningApp, run_id: str) -> None:
    """What the executor does after storing events: wake the run's poller now."""
    assert app.runtime.events is not None
    app.runtime.events.hint(run_id)


def ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def add_artifact(
    app: RunningApp,
    world: World,
    run_id: str,
    content: bytes,
    *,
    artifact_type: str = "FAILED_ITEMS",
    file_name: str = "failed.jsonl",
    content_type: str = "application/x-ndjson",
    ready: bool = True,
) -> Artifact:
    """Store ``content`` in the Service's artifact store and register it for the run, as an executor
    finishing a run would."""
    store = app.runtime.artifact_store
    assert store is not None
    artifact_id = new_id()
    key = store.new_key(
        workspace_id=world.workspace_id,
        owner_type=ArtifactOwnerType.RUN,
        owner_id=run_id,
        artifact_id=artifact_id,
        extension=file_name.rsplit(".", 1)[-1],
    )
    stored_size: int | None = None
    digest: str | None = None
    if ready:
        upload = await store.begin_upload(key)
        await upload.write(content)
        stored = await store.complete(upload)
        stored_size, digest = stored.size_bytes, stored.sha256
    now = utc_now()
    artifact = Artifact(
        id=artifact_id,
        workspace_id=world.workspace_id,
        owner_type=ArtifactOwnerType.RUN,
        owner_id=run_id,
        artifact_type=artifact_type,
        state=ArtifactState.READY if ready else ArtifactState.UPLOADING,
        storage_key=key,
        size_bytes=stored_size,
        sha256=digest,
        content_type=content_type,
        file_name=file_name,
        created_at=now,
        updated_at=now,
    )
    async with uow(app)() as unit:
        return await unit.artifacts.add(artifact)
