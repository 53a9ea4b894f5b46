"""A small, real world for execution tests: workspace, account (with a sealed secret), message, audience
snapshot, job, runs, and an embedded agent tuned for fast test loops. Everything goes through the
repositories, the snapshot builder and the agent's public API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from tests.helpers_secrets import add_account_secret
from wepush.agent.engine import EngineOptions, ExecutionClock
from wepush.agent.providers.catalog import ProviderCatalog
from wepush.agent.providers.http import HttpProviderFactory
from wepush.server.application.execution import (
    ArtifactStore,
    RunAvailabilityNotifier,
    snapshot_for_job,
)
from wepush.server.domain import (
    Account,
    Agent,
    AgentKind,
    Artifact,
    ArtifactOwnerType,
    Audience,
    AudienceImport,
    ClaimedLease,
    ImportFormat,
    ImportState,
    Job,
    Message,
    MessageRevision,
    PageRequest,
    Run,
    RunCommand,
    RunCommandType,
    RunEvent,
    RunEventDraft,
    StagedRow,
    StagedRowStatus,
    UnitOfWorkFactory,
    Workspace,
    new_id,
    utc_now,
)
from wepush.server.domain.secrets import SecretScrubber, SecretStore
from wepush.server.infra.execution import EmbeddedAgent, EmbeddedAgentSettings

AgentFactory = Callable[..., EmbeddedAgent]
"""``agents(provider, **make_agent options)``: an embedded agent sending through ``provider`` alone, not
started yet (the ``agents`` fixture)."""

TOKEN = "tok-Zx81-9f8e7d6c-secret"  # a test secret that must never leak
TOKEN_NAME = "http-account-token"


@dataclass(frozen=True)
class World:
    workspace: Workspace
    account: Account
    message: Message
    revision: MessageRevision
    audience: Audience
    job: Job


def mobile(n: int) -> str:
    return f"1380000{n:04d}"


def http_account_config(base_url: str) -> dict[str, Any]:
    return {
        "baseUrl": base_url,
        "auth": {"type": "BEARER", "token": {"$secret": TOKEN_NAME}},
        "connectTimeout": "PT2S",
        "requestTimeout": "PT60S",
    }


HTTP_MESSAGE: dict[str, Any] = {
    "method": "POST",
    "path": "/notify",
    "headers": {"Content-Type": "application/json"},
    "bodyTemplate": '{"mobile":"{{mobile}}","content":"{{content}}"}',
    "successCondition": {"jsonPath": "$.success", "equals": True},
}


async def build_world(
    uow: UnitOfWorkFactory,
    secret_store: SecretStore,
    *,
    recipients: int,
    provider_id: str = "wepush.fake",
    account_config: Mapping[str, Any] | None = None,
    message_content: Mapping[str, Any] | None = None,
    policies: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
) -> World:
    now = utc_now()
    workspace = Workspace(name=f"ws-{new_id()[-8:]}", created_at=now, updated_at=now)
    account = Account(
        workspace_id=workspace.id,
        name="main",
        provider_id=provider_id,
        provider_version="1.0.0",
        config=dict(account_config or {"endpoint": "fake"}),
        schema_version="1",
        created_at=now,
        updated_at=now,
    )
    message = Message(
        workspace_id=workspace.id, name="notice", provider_id=provider_id, created_at=now, updated_at=now
    )
    revision = MessageRevision.of(
        workspace_id=workspace.id,
        message_id=message.id,
        revision=1,
        content=dict(message_content or {"text": "hi"}),
        now=now,
    )
    audience = Audience(workspace_id=workspace.id, name="people", created_at=now, updated_at=now)
    async with uow() as unit:
        await unit.workspaces.add(workspace)
        await unit.accounts.add(account)
        await unit.messages.add(message, revision)
        await unit.audiences.add(audience)
        for name, value in (secrets or {}).items():
            await add_account_secret(
                unit,
                secret_store,
                workspace_id=workspace.id,
                account_id=account.id,
                name=name,
                value=value.encode(),
                now=now,
            )
    audience = await _commit_audience(uow, audience, recipients)
    assert audience.latest_snapshot_id is not None
    job = Job(
        workspace_id=workspace.id,
        name="job",
        account_id=account.id,
        message_id=message.id,
        message_revision=1,
        audience_snapshot_id=audience.latest_snapshot_id,
        policies=dict(
            policies or {"concurrency": {"min": 1, "max": 16, "target": 8}, "retry": {"maxAttempts": 1}}
        ),
        created_at=now,
        updated_at=now,
    )
    async with uow() as unit:
        await unit.jobs.add(job)
    return World(workspace, account, message, revision, audience, job)


async def build_http_world(
    uow: UnitOfWorkFactory,
    secret_store: SecretStore,
    vendor_url: str,
    *,
    recipients: int,
    policies: Mapping[str, Any] | None = None,
) -> World:
    """A world whose account sends through the HTTP provider to the vendor at ``vendor_url`` with the
    sealed bearer ``TOKEN``, and whose message is ``HTTP_MESSAGE``."""
    return await build_world(
        uow,
        secret_store,
        recipients=recipients,
        provider_id="wepush.http",
        account_config=http_account_config(vendor_url),
        message_content=HTTP_MESSAGE,
        secrets={TOKEN_NAME: TOKEN},
        policies=policies,
    )


def loopback_http_catalog() -> ProviderCatalog:
    """The HTTP provider alone, allowed to reach a vendor on the loopback interface."""
    return ProviderCatalog.from_factories([HttpProviderFactory(allow_loopback_for_tests=True)])


async def _commit_audience(uow: UnitOfWorkFactory, audience: Audience, count: int) -> Audience:
    now = utc_now()
    audience_import = AudienceImport(
        workspace_id=audience.workspace_id,
        audience_id=audience.id,
        state=ImportState.STAGING,
        format=ImportFormat.CSV,
        options={"hasHeader": True},
        columns=["mobile", "content"],
        expires_at=now + timedelta(days=1),
        created_at=now,
        updated_at=now,
    )
    rows = [
        StagedRow(
            line_number=n,
            status=StagedRowStatus.ACCEPTED,
            item_key=mobile(n),
            fields={"mobile": mobile(n), "content": f"notice {n}"},
        )
        for n in range(1, count + 1)
    ]
    async with uow() as unit:
        await unit.audience_imports.add(audience_import)
        await unit.audience_imports.stage_rows(audience_import.id, rows)
        counts = await unit.audience_imports.count_staged(audience_import.id)
        staged = await unit.audience_imports.update(
            replace(audience_import, state=ImportState.STAGED, counts=counts)
        )
        current = await unit.audiences.get(audience.workspace_id, audience.id)
        committed = await unit.audience_imports.commit(current, staged)
    return committed.audience


async def create_run(
    uow: UnitOfWorkFactory,
    world: World,
    notifier: RunAvailabilityNotifier | None = None,
    *,
    dry_run: bool = False,
    policy_overrides: Mapping[str, Any] | None = None,
) -> Run:
    """What the run-creation use case does: freeze the snapshot, insert the PENDING run, RUN_CREATED,
    commit, then hint the claimer."""
    now = utc_now()
    async with uow() as unit:
        snapshot = await snapshot_for_job(
            unit,
            workspace_id=world.workspace.id,
            job_id=world.job.id,
            run_id=new_id(),
            dry_run=dry_run,
            policy_overrides=policy_overrides,
        )
        run = await unit.runs.add(snapshot.new_run(created_at=now))
        await unit.run_events.append(
            run.workspace_id, run.id, [RunEventDraft(type="RUN_CREATED", occurred_at=now)]
        )
    if notifier is not None:
        notifier.notify()
    return run


async def send_command(
    uow: UnitOfWorkFactory,
    run: Run,
    notifier: RunAvailabilityNotifier,
    command_type: RunCommandType,
    payload: Mapping[str, Any] | None = None,
) -> str:
    now = utc_now()
    command_id = new_id()
    async with uow() as unit:
        await unit.run_commands.add(
            RunCommand(
                workspace_id=run.workspace_id,
                run_id=run.id,
                command_id=command_id,
                type=command_type,
                payload=dict(payload or {}),
                created_at=now,
                updated_at=now,
            )
        )
    notifier.notify()
    return command_id


async def eventually(
    probe: Callable[[], Awaitable[bool]],
    *,
    within: float = 30.0,
    what: str | Callable[[], str] = "condition",
) -> None:
    """Poll ``probe`` (usually a database read) until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what if isinstance(what, str) else what()}")
        await asyncio.sleep(0.05)


async def load_run(uow: UnitOfWorkFactory, run: Run) -> Run:
    async with uow(read_only=True) as unit:
        return await unit.runs.get(run.workspace_id, run.id)


async def events_of(uow: UnitOfWorkFactory, run: Run) -> list[RunEvent]:
    events: list[RunEvent] = []
    after: int | None = None
    async with uow(read_only=True) as unit:
        while True:
            page = await unit.run_events.list_page(run.id, PageRequest(limit=500, after=after))
            events += page.items
            if page.next_after is None:
                return events
            after = page.next_after


async def artifacts_of(uow: UnitOfWorkFactory, run: Run) -> dict[str, Artifact]:
    async with uow(read_only=True) as unit:
        found = await unit.artifacts.list_for_owner(run.workspace_id, ArtifactOwnerType.RUN, run.id)
    return {a.artifact_type: a for a in found}


def make_agent(
    uow: UnitOfWorkFactory,
    catalog: ProviderCatalog,
    store: ArtifactStore,
    secret_store: SecretStore,
    notifier: RunAvailabilityNotifier,
    workspace_id: str,
    *,
    engine_clock: ExecutionClock | None = None,
    redactor: SecretScrubber | None = None,
    **settings: Any,
) -> EmbeddedAgent:
    """``engine_clock``: the engine's timers (pause limits, deadlines), the real clock unless given.
    ``redactor``: what the runs mask what they store and log with, the process-wide one unless given."""
    defaults: dict[str, Any] = {
        "scan_interval": timedelta(milliseconds=200),
        "command_poll_interval": timedelta(milliseconds=100),
        "lease_ttl": timedelta(seconds=10),
        "shutdown_grace": timedelta(milliseconds=500),
        "engine_options": EngineOptions(
            read_batch_size=10,
            read_low_water=5,
            result_batch_size=100,
            progress_interval=timedelta(milliseconds=500),
        ),
    }
    return EmbeddedAgent(
        uow=uow,
        providers=catalog,
        artifact_store=store,
        secret_store=secret_store,
        notifier=notifier,
        workspace_id=workspace_id,
        settings=EmbeddedAgentSettings(**(defaults | settings)),
        engine_clock=engine_clock,
        redactor=redactor,
    )


async def finished(uow: UnitOfWorkFactory, run: Run) -> bool:
    return (await load_run(uow, run)).state.is_terminal


def identity_holds(run: Run) -> bool:
    c = run.counts
    return c.total == c.succeeded + c.failed + c.unknown + c.unsent + c.skipped


def jsonl(data: bytes) -> list[str]:
    return [line for line in data.decode().splitlines() if line]


def types_of(events: Sequence[RunEvent]) -> list[str]:
    return [e.type for e in events]


async def claim_run(
    uow: UnitOfWorkFactory, world: World, run: Run, *, lease: timedelta = timedelta(minutes=5)
) -> ClaimedLease:
    """Register a fresh embedded agent and claim ``run`` for it (a five-minute lease unless ``lease``)."""
    now = utc_now()
    async with uow() as unit:
        agent = await unit.agents.add(
            Agent(
                workspace_id=world.workspace.id,
                display_name=f"agent-{now.timestamp()}",
                kind=AgentKind.EMBEDDED,
                agent_version="0",
                created_at=now,
                updated_at=now,
            )
        )
        claimed = await unit.leases.claim(
            run.workspace_id,
            run.id,
            agent.id,
            expires_at=now + lease,
            ack_deadline=now + lease,
        )
    assert claimed is not None
    return claimed
