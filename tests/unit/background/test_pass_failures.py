"""A background loop through a database outage logs one warning and one recovery line, not a traceback per
pass; any other failure keeps its traceback, once per fault."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from wepush.server.application.background import PassFailures, database_outage, repeat_every
from wepush.server.domain import DatabaseBusy, DatabaseUnavailable, LeaseExpired

LOGGER = "wepush.tests.background"


class Seconds:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def unavailable() -> DatabaseUnavailable:
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
        except OSError as refused:
            raise DatabaseUnavailable() from refused
    except DatabaseUnavailable as error:
        return error


def broken_sweep(detail: str) -> None:
    raise KeyError(detail)


def other_bug() -> None:
    raise ValueError("another bug")


def records(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= level]


def failures(
    loop: str = "lease reaper", event: str = "LEASE_REAPER_FAILED", clock: Seconds | None = None
) -> PassFailures:
    return PassFailures(logging.getLogger(LOGGER), loop, event=event, clock=clock or Seconds())


def test_an_outage_of_many_passes_is_one_warning_without_traceback_then_one_recovery_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = Seconds()
    reaper = failures(clock=clock)

    for _ in range(30):  # a 30 s outage, a pass a second
        with reaper.attempt():
            raise unavailable()
        clock.now += 1
    for _ in range(3):
        with reaper.attempt():
            pass

    told = records(caplog)
    assert [(r.levelname, getattr(r, "event", None)) for r in told] == [
        ("WARNING", "LEASE_REAPER_FAILED"),
        ("INFO", "BACKGROUND_PASS_RECOVERED"),
    ]
    warning, recovered = told
    assert warning.exc_info is None
    assert warning.getMessage() == (
        "lease reaper failed: the database is unavailable (ConnectionRefusedError); retrying, quietly until "
        "a pass succeeds again"
    )
    assert getattr(warning, "loop", None) == "lease reaper"
    assert recovered.exc_info is None
    assert getattr(recovered, "loop", None) == "lease reaper"
    assert getattr(recovered, "failedPasses", None) == 30
    assert recovered.getMessage() == (
        "lease reaper succeeded again after 30 failed pass(es) over 30.0 s (the database was unavailable)"
    )
    # The passes between are there for whoever turns debug on, and only there.
    assert len(records(caplog, logging.DEBUG)) == 1 + 29 + 1
    assert "Traceback" not in caplog.text


def test_a_busy_database_and_a_failure_raised_from_an_outage_are_outages_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    heartbeat = failures("embedded agent heartbeat", "AGENT_HEARTBEAT_FAILED")
    try:
        raise LeaseExpired("lease_1") from unavailable()
    except LeaseExpired as error:
        outlasted = error

    with heartbeat.attempt():
        raise DatabaseBusy()
    with heartbeat.attempt():
        raise outlasted
    with heartbeat.attempt():
        pass

    assert database_outage(outlasted) is outlasted.__cause__
    assert database_outage(RuntimeError("not the database")) is None
    told = records(caplog)
    assert [(r.levelname, r.exc_info) for r in told] == [("WARNING", None), ("INFO", None)]
    assert told[0].getMessage().startswith("embedded agent heartbeat failed: the database is busy;")
    assert "after 2 failed pass(es)" in told[1].getMessage()


def test_another_failure_keeps_its_traceback_and_its_repeats_are_one_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    retention = failures("import retention", "IMPORT_RETENTION_FAILED")

    for attempt in range(4):
        with retention.attempt():
            broken_sweep(f"import {attempt}")  # the same fault, whatever its message says
    with retention.attempt():
        pass

    told = records(caplog)
    assert [(r.levelname, getattr(r, "event", None), r.exc_info is not None) for r in told] == [
        ("ERROR", "IMPORT_RETENTION_FAILED", True),
        ("WARNING", "IMPORT_RETENTION_FAILED", False),
        ("WARNING", "IMPORT_RETENTION_FAILED", False),
        ("WARNING", "IMPORT_RETENTION_FAILED", False),
        ("INFO", "BACKGROUND_PASS_RECOVERED", False),
    ]
    assert told[0].exc_info is not None
    assert isinstance(told[0].exc_info[1], KeyError)
    assert "Traceback" in caplog.text
    assert [r.getMessage() for r in told[1:4]] == [
        f"import retention failed again with the same KeyError ({n} passes in a row); its traceback is at "
        "the first"
        for n in (2, 3, 4)
    ]
    assert told[4].getMessage().startswith("import retention succeeded again after 4 failed pass(es)")


def test_a_different_fault_gets_its_own_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    rebuild = failures("artifact rebuild", "ARTIFACT_REBUILD_FAILED")

    with rebuild.attempt():
        broken_sweep("a")
    with rebuild.attempt():
        other_bug()
    with rebuild.attempt():
        raise unavailable()  # an outage meanwhile is told as one, not as a fault
    with rebuild.attempt():
        other_bug()

    told = records(caplog)
    assert [(r.levelname, r.exc_info is not None) for r in told] == [
        ("ERROR", True),
        ("ERROR", True),
        ("WARNING", False),
        ("WARNING", False),
    ]
    assert told[2].getMessage().startswith("artifact rebuild failed: the database is unavailable")
    assert "same ValueError (3 passes in a row)" in told[3].getMessage()


def test_an_outage_failing_every_part_is_told_once_and_a_part_s_fault_is_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    delivery = failures("command delivery", "COMMAND_DELIVERY_FAILED")
    runs = [f"run {n}" for n in range(5)]

    for _ in range(10):
        for run in runs:
            with delivery.attempt(run):
                raise unavailable()
    for _ in range(3):
        with delivery.attempt("run 0"):
            broken_sweep("run 0")
        for run in runs[1:]:
            with delivery.attempt(run):
                pass
    delivery.forget("run 0")  # the run ended
    with delivery.attempt("run 0"):
        pass

    told = [(r.levelname, r.getMessage().split(";")[0].split(" over ")[0]) for r in records(caplog)]
    assert told == [
        ("WARNING", "command delivery failed: the database is unavailable (ConnectionRefusedError)"),
        ("ERROR", "run 0: command delivery failed"),
        (
            "INFO",
            "command delivery succeeded again after 50 failed pass(es)",
        ),
        ("WARNING", "run 0: command delivery failed again with the same KeyError (2 passes in a row)"),
        ("WARNING", "run 0: command delivery failed again with the same KeyError (3 passes in a row)"),
    ]


def test_the_outage_line_names_its_cause_s_type_never_its_text(caplog: pytest.LogCaptureFixture) -> None:
    # A driver's error can quote a connection string or a statement's parameters.
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    reaper = failures()
    try:
        try:
            raise OSError("could not connect to postgresql://wepush:hunter2@db:5432/wepush")
        except OSError as refused:
            raise DatabaseUnavailable() from refused
    except DatabaseUnavailable as error:
        outage = error

    for _ in range(3):
        with reaper.attempt():
            raise outage

    assert "(OSError)" in caplog.text
    assert "hunter2" not in caplog.text


def test_a_success_without_failures_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    reaper = failures()

    for _ in range(3):
        with reaper.attempt():
            pass

    assert records(caplog, logging.DEBUG) == []


async def test_a_cancelled_pass_is_neither_told_nor_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    reaper = failures()

    with pytest.raises(asyncio.CancelledError), reaper.attempt():
        raise asyncio.CancelledError

    assert records(caplog, logging.DEBUG) == []


async def test_repeat_every_goes_on_after_failed_passes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    passes = 0

    async def one_pass() -> None:
        nonlocal passes
        passes += 1
        if passes <= 3:
            raise unavailable()
        if passes == 5:
            raise asyncio.CancelledError  # how the owner stops the loop

    with pytest.raises(asyncio.CancelledError):
        await repeat_every(timedelta(0), one_pass, failures("import retention", "IMPORT_RETENTION_FAILED"))

    assert passes == 5
    assert [(r.levelname, getattr(r, "failedPasses", None)) for r in records(caplog)] == [
        ("WARNING", None),
        ("INFO", 3),
    ]


def test_a_failure_event_is_an_upper_snake_code() -> None:
    with pytest.raises(ValueError, match="UPPER_SNAKE"):
        PassFailures(logging.getLogger(LOGGER), "lease reaper", event="lease reaper failed")
