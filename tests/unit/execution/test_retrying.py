"""``retrying`` runs a transaction again after a glitch of the database, and never after an answer."""

from __future__ import annotations

import pytest

from wepush.server.application.execution._fence import retrying
from wepush.server.domain import DatabaseBusy, DatabaseUnavailable, LeaseExpired


async def test_an_unavailable_or_busy_database_is_tried_again() -> None:
    failures: list[Exception] = [DatabaseUnavailable(), DatabaseBusy()]
    calls = 0

    async def operation() -> str:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)
        return "done"

    assert await retrying(operation, delay=0) == "done"
    assert calls == 3


async def test_an_outage_that_outlasts_the_attempts_is_raised() -> None:
    async def operation() -> None:
        raise DatabaseUnavailable()

    with pytest.raises(DatabaseUnavailable):
        await retrying(operation, attempts=3, delay=0)


async def test_a_domain_answer_is_not_tried_again() -> None:
    calls = 0

    async def operation() -> None:
        nonlocal calls
        calls += 1
        raise LeaseExpired("run-1")

    with pytest.raises(LeaseExpired):
        await retrying(operation, delay=0)
    assert calls == 1
