"""A vendor that quotes an account secret back: the resolved value is masked in everything the run stores.

The provider here is a careless plugin: it sends the secret to a loopback vendor and reports the vendor's
answer verbatim (diagnostic and response body) or raises with it. The secret has no shape a redaction
rule knows, so only the values the run registered with the Service's redactor can mask it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import aiohttp
import pytest

from tests.integration.execution._world import (
    AgentFactory,
    World,
    artifacts_of,
    build_world,
    create_run,
    events_of,
    eventually,
    finished,
    load_run,
)
from wepush.agent.engine import (
    CancellationToken,
    ConfigDocument,
    ConnectionTestResult,
    ErrorCategory,
    ProviderDescriptor,
    ProviderOpenContext,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    SecretRef,
    SecretResolver,
    ValidationResult,
)
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.testing import ScriptedResponse, VendorServer
from wepush.server.application.execution import ArtifactDownloads, RunAvailabilityNotifier
from wepush.server.domain import PageRequest, Run, RunState
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.execution import EmbeddedAgent
from wepush.server.infra.logging import MASK, Redactor
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

SECRET_NAME = "account-password"
SECRET = "k7Qx9Lm2Pz"  # no sensitive shape: no rule masks it by itself
RECIPIENTS = 3
_REF = SecretRef("account", SECRET_NAME)


class _EchoingSession(ProviderSession):
    def __init__(self, endpoint: str, secret: str) -> None:
        self._endpoint = endpoint
        self._secret = secret
        self._http = aiohttp.ClientSession()

    async def login(self) -> None:
        async with self._http.post(f"{self._endpoint}/login", json={"password": self._secret}) as response:
            if response.status >= 400:
                raise RuntimeError(f"login refused: {await response.text()}")

    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        async with self._http.post(f"{self._endpoint}/send", headers={"X-Caller": self._secret}) as response:
            text = await response.text()
        return ProviderResult.failure(
            ErrorCategory.INVALID_REQUEST,
            "VENDOR_REJECTED",
            f"vendor answered {response.status}: {text}",
            response_body=text,
        )

    async def close(self) -> None:
        await self._http.close()


class _EchoingFactory:
    """The fake provider's descriptor and validation; sessions that talk to ``endpoint``."""

    def __init__(self, *, login: bool = False) -> None:
        self._fake = FakeProviderFactory()
        self._login = login

    def descriptor(self) -> ProviderDescriptor:
        return self._fake.descriptor()

    def validate_account(self, config: ConfigDocument) -> ValidationResult:
        return self._fake.validate_account(config)

    def validate_message(self, config: ConfigDocument) -> ValidationResult:
        return self._fake.validate_message(config)

    async def test_connection(
        self,
        account: ConfigDocument,
        secrets: SecretResolver,
        timeout: timedelta,  # noqa: ASYNC109 - SPI signature
    ) -> ConnectionTestResult:
        return await self._fake.test_connection(account, secrets, timeout)

    async def open(self, context: ProviderOpenContext) -> _EchoingSession:
        with await context.secrets.resolve(_REF) as value:
            secret = value.copy_str()
        session = _EchoingSession(str(context.account_config.json()["endpoint"]), secret)
        if self._login:
            try:
                await session.login()
            except BaseException:
                await session.close()
                raise
        return session


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    answer = {"success": False, "message": f"caller {SECRET} is not allowed to send"}
    async with VendorServer(default=ScriptedResponse(403, json=answer)) as server:
        yield server


@pytest.fixture
async def world(
    uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore, vendor: VendorServer
) -> World:
    return await build_world(
        uow,
        secret_store,
        recipients=RECIPIENTS,
        account_config={"endpoint": vendor.base_url, "password": {"$secret": SECRET_NAME}},
        policies={
            "concurrency": {"min": 1, "max": 4, "target": 2},
            "retry": {"maxAttempts": 1},
            "result": {"saveResponseBody": True},
        },
        secrets={SECRET_NAME: SECRET},
    )


async def _run_with(
    uow: SqlUnitOfWorkFactory, notifier: RunAvailabilityNotifier, world: World, agent: EmbeddedAgent
) -> Run:
    """Run the world's job on ``agent`` to its end; the run as it ended."""
    await agent.start()
    try:
        run = await create_run(uow, world, notifier)
        await eventually(lambda: finished(uow, run), what="the run to finish")
    finally:
        await agent.shutdown()
    return await load_run(uow, run)


async def _everything_stored(uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, run: Run) -> str:
    """Item results, events, every artifact's bytes and the run's (state) reason, as one text."""
    async with uow(read_only=True) as unit:
        items = (await unit.run_items.list_page(run.id, PageRequest(limit=500))).items
    events = await events_of(uow, run)
    downloads = ArtifactDownloads(uow, artifact_store)
    contents = []
    for artifact in (await artifacts_of(uow, run)).values():
        opened = await downloads.open_artifact(run.workspace_id, run.id, artifact.id)
        contents.append(b"".join([chunk async for chunk in opened.chunks]).decode())
    return "\n".join(
        [
            *(f"{item}" for item in items),
            json.dumps([e.data for e in events]),
            *contents,
            f"{run.state_reason}",
        ]
    )


async def test_a_vendor_error_quoting_the_secret_is_stored_with_the_secret_masked(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    vendor: VendorServer,
    world: World,
    agents: AgentFactory,
) -> None:
    run = await _run_with(uow, notifier, world, agents(_EchoingFactory(), redactor=Redactor()))

    assert run.state is RunState.FAILED
    assert run.counts.failed == RECIPIENTS
    assert {r.headers["X-Caller"] for r in vendor.requests} == {SECRET}  # the vendor did get it
    async with uow(read_only=True) as unit:
        items = (await unit.run_items.list_page(run.id, PageRequest(limit=500))).items
    assert [item.diagnostic for item in items] == [
        f'vendor answered 403: {{"success": false, "message": "caller {MASK} is not allowed to send"}}'
    ] * RECIPIENTS
    events = await events_of(uow, run)
    item_errors = [e.data for e in events if e.type == "ITEM_ERROR"]
    assert len(item_errors) == RECIPIENTS
    assert all(f"caller {MASK} is not allowed" in data["diagnostic"] for data in item_errors)
    artifacts = await artifacts_of(uow, run)
    assert {"FAILED_ITEMS", "RESULTS_EXPORT", "RUN_LOG"} <= set(artifacts)
    stored = await _everything_stored(uow, artifact_store, run)
    assert f"caller {MASK} is not allowed" in stored  # the response body excerpt was kept, masked
    assert SECRET not in stored


async def test_a_provider_that_cannot_open_quoting_the_secret_fails_the_run_with_it_masked(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    vendor: VendorServer,
    world: World,
    agents: AgentFactory,
) -> None:
    run = await _run_with(uow, notifier, world, agents(_EchoingFactory(login=True), redactor=Redactor()))

    assert run.state is RunState.FAILED
    assert run.counts.unsent == RECIPIENTS
    assert [r.path for r in vendor.requests] == ["/login"]
    assert run.state_reason is not None
    assert run.state_reason.startswith("PROVIDER_SESSION_FAILED")
    assert f"caller {MASK} is not allowed" in run.state_reason
    # Each item says why with the run's own code: no executor was lost.
    async with uow(read_only=True) as unit:
        items = (await unit.run_items.list_page(run.id, PageRequest(limit=500))).items
    assert {(item.provider_code, item.diagnostic) for item in items} == {
        ("PROVIDER_SESSION_FAILED", "the run was refused before dispatch (PROVIDER_SESSION_FAILED)")
    }
    stored = await _everything_stored(uow, artifact_store, run)
    assert SECRET not in stored
