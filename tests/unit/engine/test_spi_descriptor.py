"""The Provider SPI package: exports, descriptor loading from package data, and default session hooks."""

from __future__ import annotations

from datetime import timedelta

import pytest

import wepush.agent.providers.spi as spi
from wepush.agent.engine import (
    ConfigDocument,
    MappingSecretResolver,
    ProviderOpenContext,
    ProviderSchemas,
    RecipientRecord,
)
from wepush.agent.engine.testing import FakeClock
from wepush.agent.providers.fake import FakeProviderFactory
from wepush.agent.providers.spi import (
    SPI_VERSION,
    CancellationToken,
    DescriptorError,
    PreviewNotSupported,
    ProviderPreviewRequest,
    ProviderResult,
    ProviderSendRequest,
    ProviderSession,
    ThreadSafetyMode,
    WorkerSessionsNotSupported,
    load_descriptor_from_package,
    parse_descriptor,
)

from .support import spec


def test_spi_exports_exist() -> None:
    for name in spi.__all__:
        assert hasattr(spi, name), name
    assert SPI_VERSION == "1"


def test_fake_descriptor_loads_from_package_data() -> None:
    descriptor = load_descriptor_from_package("wepush.agent.providers.fake")
    assert descriptor.provider_id == "wepush.fake"
    assert descriptor.spi_version == SPI_VERSION
    assert descriptor.thread_safety is ThreadSafetyMode.SERIALIZED
    assert descriptor.default_timeout == timedelta(seconds=30)
    assert descriptor.capabilities.preview
    assert descriptor.capabilities.dry_run
    assert not descriptor.capabilities.safe_to_retry_on_timeout
    assert descriptor.schemas.account["properties"]["token"]["x-wepush-secret"] is True
    assert descriptor.schemas.recipient["required"] == ["address"]
    assert descriptor.schemas.ui["title"]


def test_a_missing_package_or_slug_is_a_descriptor_error() -> None:
    with pytest.raises(DescriptorError, match="cannot be imported"):
        load_descriptor_from_package("wepush.agent.providers.no_such_provider")
    with pytest.raises(DescriptorError, match=r"providers/nope/provider\.json is missing"):
        load_descriptor_from_package("wepush.agent.providers.fake", "nope")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "JSON object"),
        ({"displayName": "x", "version": "1"}, "providerId"),
        (
            {"providerId": "x", "displayName": "x", "version": "1", "colour": "red"},
            "unknown provider.json keys",
        ),
        (
            {"providerId": "x", "displayName": "x", "version": "1", "capabilities": {"teleport": True}},
            "unknown",
        ),
        ({"providerId": "x", "displayName": "x", "version": "1", "concurrencyLimit": 0}, "positive integer"),
        ({"providerId": "x", "displayName": "x", "version": "1", "defaultTimeout": 30}, "ISO-8601"),
        ({"providerId": "x", "displayName": "x", "version": "1", "threadSafety": "MAYBE"}, "MAYBE"),
    ],
)
def test_malformed_descriptors_are_rejected_with_a_reason(raw: object, message: str) -> None:
    with pytest.raises(DescriptorError, match=message):
        parse_descriptor(raw, ProviderSchemas())


class _MinimalSession(ProviderSession):
    async def send(self, request: ProviderSendRequest, token: CancellationToken) -> ProviderResult:
        return ProviderResult.ok()

    async def close(self) -> None:
        return None


async def test_session_defaults_refuse_preview_and_worker_sessions() -> None:
    session = _MinimalSession()
    request = ProviderPreviewRequest(ConfigDocument.from_json("m", "1", {}))
    with pytest.raises(PreviewNotSupported):
        await session.preview(request)
    with pytest.raises(WorkerSessionsNotSupported):
        await session.open_worker()


async def test_cancellation_token_runs_callbacks_once_and_wakes_waiters() -> None:
    token = CancellationToken()
    seen: list[str] = []
    token.add_callback(lambda: seen.append("a"))
    token.add_callback(lambda: (_ for _ in ()).throw(RuntimeError("bad callback")))
    token.add_callback(lambda: seen.append("b"))
    token.cancel("stop")
    token.cancel("again")
    await token.wait()
    token.add_callback(lambda: seen.append("late"))
    assert token.cancelled
    assert token.reason == "stop"
    assert seen == ["a", "b", "late"]


async def test_fake_provider_validates_json_objects_and_renders_a_preview() -> None:
    factory = FakeProviderFactory()
    run_spec = spec()
    assert factory.validate_account(run_spec.account_config).ok
    assert not factory.validate_message(ConfigDocument.from_json("m", "1", [1])).ok
    context = ProviderOpenContext(
        "r",
        run_spec.account_config,
        run_spec.message_config,
        MappingSecretResolver({}),
        run_spec.policies,
        False,
        FakeClock(),
    )
    session = await factory.open(context)
    preview = await session.preview(
        ProviderPreviewRequest(run_spec.message_config, RecipientRecord.of("i", 1, {"address": "a@x.test"}))
    )
    assert preview.rendered == "hello a@x.test"
    await session.close()
    await session.close()
    assert session.closed
    assert session.close_calls == 2
