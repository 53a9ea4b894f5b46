"""A compressed answer is capped by what it inflates to, not by its ``Content-Length``."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import pytest

from wepush.agent.providers.testing import ScriptedResponse, VendorServer

from ._http_support import account_doc, http_session, message_doc, send


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        yield server


async def test_a_small_gzip_answer_that_inflates_past_the_cap_is_truncated(vendor: VendorServer) -> None:
    bomb = gzip.compress(b"x" * 200_000)
    vendor.enqueue("/notify", ScriptedResponse(200, body=bomb, headers={"Content-Encoding": "gzip"}))
    message = message_doc(saveResponseBody=True, responseBodyMaxBytes=1000)

    async with http_session(account_doc(vendor.base_url), message) as session:
        result = await send(session, message=message)

    assert len(bomb) < 1000
    assert result.success
    assert result.response_body == "x" * 1000
    assert result.response_truncated
