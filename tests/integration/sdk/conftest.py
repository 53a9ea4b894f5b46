"""Fixtures for the remote SDK against a scripted loopback Service."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wepush.sdk.remote import ReconnectPolicy, WePushClient

from ._service import TOKEN, ScriptedService


@pytest.fixture
def service() -> Iterator[ScriptedService]:
    with ScriptedService() as running:
        yield running


@pytest.fixture
def client(service: ScriptedService) -> Iterator[WePushClient]:
    # Tiny backoffs keep the suite fast; the policy's decisions, not its delays, are under test.
    with WePushClient(
        service.endpoint,
        TOKEN,
        connect_timeout=2.0,
        request_timeout=5.0,
        max_retries=3,
        max_retry_wait=2.0,
        initial_backoff=0.01,
        max_backoff=0.05,
        reconnect=ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_attempts=3, heartbeat_timeout=5.0),
    ) as sdk:
        yield sdk
