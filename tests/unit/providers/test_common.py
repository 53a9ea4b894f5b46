"""The building blocks channel providers share: their public names and their cancellation rule."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import wepush.agent.providers.common as common
from wepush.agent.engine import ExecutionPolicies, TimeoutPolicy
from wepush.agent.providers.common import await_cancellable, connect_timeout_for
from wepush.agent.providers.spi import CancellationToken

EXPECTED = {
    "DEFAULT_SECRET_NAMESPACE",
    "ConfigError",
    "Draft202012",
    "RenderProblem",
    "RequestTimeouts",
    "Template",
    "TemplateSyntaxError",
    "UnknownVariableError",
    "await_cancellable",
    "connect_timeout_for",
    "duration_field",
    "failed_preview",
    "most_specific",
    "parse_retry_after",
    "parse_url",
    "read_capped",
    "scalar_text",
    "secret_ref",
    "value_free_rule",
    "violation_path",
    "while_connecting",
    "with_ecma_pattern",
}


def test_common_exports_exactly_its_curated_names() -> None:
    assert set(common.__all__) == EXPECTED
    assert all(hasattr(common, name) for name in EXPECTED)


async def _park(started: asyncio.Event) -> str:
    started.set()
    await asyncio.Event().wait()
    return "answered"


async def test_a_token_cancellation_ends_the_call_with_the_cancelled_result() -> None:
    token = CancellationToken()
    started = asyncio.Event()
    call = asyncio.create_task(await_cancellable(token, lambda: _park(started), lambda: "cancelled"))
    await started.wait()

    token.cancel("run cancelled")

    assert await call == "cancelled"


async def test_the_engines_own_task_cancellation_keeps_propagating() -> None:
    token = CancellationToken()
    started = asyncio.Event()
    call = asyncio.create_task(await_cancellable(token, lambda: _park(started), lambda: "cancelled"))
    await started.wait()

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    assert not token.cancelled


def test_a_jobs_connect_timeout_caps_the_accounts_and_never_lengthens_it() -> None:
    def policies(connect: timedelta | None) -> ExecutionPolicies:
        return ExecutionPolicies(timeout=TimeoutPolicy(connect=connect))

    assert connect_timeout_for(timedelta(seconds=10), policies(timedelta(seconds=2))) == timedelta(seconds=2)
    assert connect_timeout_for(timedelta(seconds=3), policies(timedelta(seconds=5))) == timedelta(seconds=3)
    assert connect_timeout_for(timedelta(seconds=3), policies(None)) == timedelta(seconds=3)
