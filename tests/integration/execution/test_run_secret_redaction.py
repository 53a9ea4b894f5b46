"""A run's resolved account secrets are masked in what the run writes, and only while some run needs them."""

from __future__ import annotations

import pytest

from tests.integration.execution._world import (
    AgentFactory,
    World,
    artifacts_of,
    build_world,
    create_run,
    eventually,
    finished,
)
from wepush.agent.engine import ErrorCategory, ProviderResult, SecretRef
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.server.application.execution import (
    ArtifactDownloads,
    RetentionPolicy,
    RunArtifactWriter,
    RunAvailabilityNotifier,
    RunLog,
    plain_transactions,
)
from wepush.server.domain import utc_now
from wepush.server.infra.artifacts import LocalArtifactStore
from wepush.server.infra.db import SqlUnitOfWorkFactory
from wepush.server.infra.execution import EmbeddedAgent
from wepush.server.infra.logging import MASK, Redactor
from wepush.server.infra.secrets import LocalEnvelopeSecretStore

SECRET_NAME = "account-password"
# No rule recognises this by its shape: only registering the resolved value can mask it.
SECRET = "correct horse battery staple 42"


@pytest.fixture
async def world(uow: SqlUnitOfWorkFactory, secret_store: LocalEnvelopeSecretStore) -> World:
    return await build_world(
        uow,
        secret_store,
        recipients=3,
        account_config={"endpoint": "fake", "password": {"$secret": SECRET_NAME}},
        secrets={SECRET_NAME: SECRET},
    )


def _quoting_vendor() -> FakeProviderFactory:
    """A vendor that quotes the credential back, as real ones do in error bodies."""
    return FakeProviderFactory(
        secret=SecretRef("account", SECRET_NAME),
        default=ProviderResult.failure(ErrorCategory.AUTHENTICATION, "DENIED", f"vendor rejected {SECRET}"),
    )


async def _run_log(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    agent: EmbeddedAgent,
) -> str:
    await agent.start()
    run = await create_run(uow, world, notifier)
    await eventually(lambda: finished(uow, run), what="the run to finish")
    log = (await artifacts_of(uow, run))["RUN_LOG"]
    opened = await ArtifactDownloads(uow, artifact_store).open_artifact(world.workspace.id, run.id, log.id)
    return b"".join([chunk async for chunk in opened.chunks]).decode()


async def test_a_resolved_secret_is_masked_in_the_run_log_and_released_when_the_run_ends(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    agents: AgentFactory,
) -> None:
    redactor = Redactor()

    log = await _run_log(uow, artifact_store, notifier, world, agents(_quoting_vendor(), redactor=redactor))

    assert "ITEM_ERROR" in log
    assert f"vendor rejected {MASK}" in log
    assert SECRET not in log
    # The run is over: nothing holds the value any more, so the redactor no longer keeps it.
    assert redactor.text(SECRET) == SECRET


async def test_a_secret_another_holder_still_uses_stays_masked_after_the_run_ends(
    uow: SqlUnitOfWorkFactory,
    artifact_store: LocalArtifactStore,
    notifier: RunAvailabilityNotifier,
    world: World,
    agents: AgentFactory,
) -> None:
    redactor = Redactor()
    redactor.add_secret_value(SECRET)  # another run (or a connection test) of the same account

    await _run_log(uow, artifact_store, notifier, world, agents(_quoting_vendor(), redactor=redactor))

    assert redactor.text(f"login with {SECRET}") == f"login with {MASK}"


class _Opaque:
    """A value json cannot encode; the run log renders it with ``str``."""

    def __str__(self) -> str:
        return "dsn postgresql://wepush:pa55word@db:5432/wepush"


async def test_every_run_log_line_goes_through_the_shared_rules(
    uow: SqlUnitOfWorkFactory, artifact_store: LocalArtifactStore, world: World
) -> None:
    run = await create_run(uow, world)
    writer = RunArtifactWriter(
        store=artifact_store,
        tx=plain_transactions(uow),
        workspace_id=run.workspace_id,
        run_id=run.id,
        clock=utc_now,
        retention=RetentionPolicy(),
    )
    log = RunLog(writer)  # no Service redactor given: the shared rules still apply

    await log.append(
        {
            "event": "ITEM_ERROR",
            "data": {
                "diagnostic": "POST https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7a2b: "
                '{"password": "correct horse battery"}',
                "apiKey": "k-123456",
                "detail": _Opaque(),
            },
        }
    )
    artifact = await log.finish()

    assert artifact is not None
    opened = await ArtifactDownloads(uow, artifact_store).open_artifact(
        world.workspace.id, run.id, artifact.id
    )
    text = b"".join([chunk async for chunk in opened.chunks]).decode()
    for secret in ("693a91f6-7a2b", "horse battery", "k-123456", "pa55word"):
        assert secret not in text
    assert "webhook/send?key=" in text
