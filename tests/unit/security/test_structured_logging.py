from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from wepush.server.infra.logging import (
    MASK,
    JsonFormatter,
    Redactor,
    TextFormatter,
    bind_log_context,
    configure_logging,
    current_log_context,
    current_trace_id,
)

SEED_FIELDS = [
    "timestamp",
    "level",
    "service",
    "instanceId",
    "traceId",
    "workspaceId",
    "runId",
    "agentId",
    "leaseId",
    "providerId",
    "event",
    "message",
]


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, Redactor]]:
    stream = io.StringIO()
    redactor = Redactor()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(service="wepush-server", instance_id="node-a", redactor=redactor))
    logger = logging.getLogger("wepush.test.structured")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream, redactor
    logger.removeHandler(handler)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_each_record_is_one_json_line_with_the_seed_fields(
    capture: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    logger, stream, _ = capture

    with bind_log_context(trace_id="t-1", workspace_id="ws-1"):
        logger.info(
            "lease %s granted", "lease-7", extra={"event": "LEASE_GRANTED", "runId": "run-3", "epoch": 2}
        )

    [entry] = lines(stream)
    assert list(entry)[: len(SEED_FIELDS)] == SEED_FIELDS
    assert entry["timestamp"].endswith("Z")
    assert entry["level"] == "INFO"
    assert entry["service"] == "wepush-server"
    assert entry["instanceId"] == "node-a"
    assert entry["traceId"] == "t-1"
    assert entry["workspaceId"] == "ws-1"
    assert entry["runId"] == "run-3"
    assert entry["agentId"] is None
    assert entry["event"] == "LEASE_GRANTED"
    assert entry["message"] == "lease lease-7 granted"
    assert entry["epoch"] == 2


def test_messages_fields_and_exceptions_are_redacted(
    capture: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    logger, stream, redactor = capture
    redactor.add_secret_value("account-smtp-pass")

    try:
        raise PermissionError("login refused for account-smtp-pass")
    except PermissionError:
        logger.exception(
            "calling https://h/send?access_token=tok123",
            extra={"headers": {"Authorization": "Bearer abcdefgh"}, "password": "pw-123456"},
        )

    raw = stream.getvalue()
    [entry] = lines(stream)
    for leaked in ("tok123", "abcdefgh", "pw-123456", "account-smtp-pass"):
        assert leaked not in raw
    assert entry["message"] == f"calling https://h/send?access_token={MASK}"
    assert entry["headers"] == {"Authorization": MASK}
    assert entry["password"] == MASK
    assert "PermissionError" in entry["exception"]


def test_control_characters_cannot_forge_log_lines(
    capture: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    logger, stream, _ = capture

    logger.warning("name=%s", 'evil\n{"level":"ERROR"}\r\x1b[31m\x7f\u2028end')

    raw = stream.getvalue()
    assert raw.count("\n") == 1
    for character in ("\r", "\x1b", "\x7f", "\u2028"):
        assert character not in raw
    assert lines(stream)[0]["message"] == 'name=evil\n{"level":"ERROR"}\r\x1b[31m\x7f\u2028end'


def test_log_context_is_restored_after_the_binding_ends() -> None:
    with bind_log_context(trace_id="outer", run_id="run-1"):
        with bind_log_context(trace_id="inner"):
            assert current_log_context() == {"traceId": "inner", "runId": "run-1"}
        assert current_trace_id() == "outer"
    assert current_log_context() == {}


async def test_log_context_does_not_leak_between_concurrent_tasks() -> None:
    seen: dict[str, str | None] = {}

    async def request(trace_id: str) -> None:
        with bind_log_context(trace_id=trace_id):
            await asyncio.sleep(0)
            seen[trace_id] = current_trace_id()

    await asyncio.gather(request("a"), request("b"))

    assert seen == {"a": "a", "b": "b"}
    assert current_trace_id() is None


def test_text_format_is_redacted_and_single_line_per_message() -> None:
    record = logging.LogRecord("wepush", logging.ERROR, __file__, 1, "token=%s\nforged", ("abc123",), None)
    formatter = TextFormatter(service="s", instance_id="i", redactor=Redactor())

    with bind_log_context(trace_id="t-9"):
        text = formatter.format(record)

    assert "abc123" not in text
    assert "\n" not in text
    assert "traceId=t-9" in text


def test_configure_logging_installs_one_replaceable_json_handler() -> None:
    root = logging.getLogger()
    level_before = root.level
    first_stream, second_stream = io.StringIO(), io.StringIO()
    try:
        first = configure_logging("debug", "json", "wepush-server", "node-b", stream=first_stream)
        second = configure_logging("INFO", "json", "wepush-server", "node-b", stream=second_stream)
        logging.getLogger("wepush.test.configured").info("ready", extra={"event": "SERVICE_READY"})

        assert first not in root.handlers
        assert second in root.handlers
        assert first_stream.getvalue() == ""
        entry = json.loads(second_stream.getvalue())
        assert (entry["event"], entry["instanceId"], entry["level"]) == ("SERVICE_READY", "node-b", "INFO")
    finally:
        for handler in list(root.handlers):
            if handler.formatter is not None and isinstance(handler.formatter, JsonFormatter):
                root.removeHandler(handler)
        root.setLevel(level_before)


def test_unknown_log_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format"):
        configure_logging("INFO", "xml", "s", "i")  # type: ignore[arg-type]


def test_uvicorns_coloured_copy_of_its_message_is_left_out(
    capture: tuple[logging.Logger, io.StringIO, Redactor],
) -> None:
    logger, stream, _ = capture
    logger.info("Started server process [%d]", 7, extra={"color_message": "Started \x1b[36m%d\x1b[0m"})
    line = json.loads(stream.getvalue())
    assert line["message"] == "Started server process [7]"
    assert "color_message" not in line
