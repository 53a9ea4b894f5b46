"""Fixtures: local vendor servers and one *stage* per standard provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from wepush.agent.providers.testing import VendorServer

from ._http_cases import HTTP_CASES
from ._smtp_server import Pki, SmtpServer, make_pki, smtp_server
from ._stages import HttpStage, SmtpStage, Stage

ALL_PROVIDERS = ("wepush.smtp", *(case.provider_id for case in HTTP_CASES))


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
async def vendor() -> AsyncIterator[VendorServer]:
    async with VendorServer() as server:
        yield server


@pytest.fixture
def smtp(pki: Pki) -> Iterator[SmtpServer]:
    with smtp_server(pki, "STARTTLS") as server:
        yield server


@pytest.fixture(params=ALL_PROVIDERS)
async def stage(request: pytest.FixtureRequest, pki: Pki) -> AsyncIterator[Stage]:
    """Every standard provider against its local vendor (one shared harness for all of them)."""
    provider_id: str = request.param
    if provider_id == "wepush.smtp":
        with smtp_server(pki, "STARTTLS") as server:
            yield SmtpStage(server, pki)
        return
    case = next(c for c in HTTP_CASES if c.provider_id == provider_id)
    async with VendorServer() as server:
        yield HttpStage(case, server)
