"""Small pure pieces of run execution: the availability hint, byte ranges, state paths, command mapping."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from wepush.agent.engine import CancelRun, ChangeConcurrency, CommandResult, PauseRun, ResumeRun
from wepush.server.application.execution import (
    ByteRange,
    RangeNotSatisfiable,
    RunAvailabilityNotifier,
    ack_message,
    engine_command,
    item_id_for,
    parse_range_header,
    path_to,
)
from wepush.server.domain import RunCommand, RunCommandType, RunState

NOW = datetime(2026, 8, 22, tzinfo=UTC)


async def test_a_hint_wakes_every_listener_and_is_kept_until_the_listener_waits() -> None:
    notifier = RunAvailabilityNotifier()
    with notifier.listening() as first, notifier.listening() as second:
        notifier.notify()  # nobody is waiting yet: the hint must not be lost
        assert await first.wait(1.0) is True
        assert await second.wait(1.0) is True
        assert await first.wait(0.01) is False

        waiter = asyncio.create_task(first.wait(5.0))
        await asyncio.sleep(0)
        notifier.notify()
        assert await waiter is True
    notifier.notify()  # closed listeners are gone; nothing to wake
    assert await first.wait(0.01) is False


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        ("bytes=0-99", 1000, (0, 100)),
        ("bytes=900-", 1000, (900, 1000)),
        ("bytes=-100", 1000, (900, 1000)),
        ("bytes=-5000", 1000, (0, 1000)),
        ("bytes=990-2000", 1000, (990, 1000)),
    ],
)
def test_a_range_header_resolves_to_a_half_open_slice(
    header: str, size: int, expected: tuple[int, int]
) -> None:
    parsed = parse_range_header(header)
    assert parsed is not None
    assert parsed.resolve(size) == expected


@pytest.mark.parametrize("header", [None, "", "items=0-1", "bytes=0-1,5-6", "bytes=-", "bytes=a-b"])
def test_unsupported_range_headers_mean_the_whole_content(header: str | None) -> None:
    assert parse_range_header(header) is None


@pytest.mark.parametrize(
    ("first", "last", "size"), [(1000, None, 1000), (10, 5, 100), (None, 0, 100), (None, 5, 0)]
)
def test_ranges_outside_the_content_are_not_satisfiable(
    first: int | None, last: int | None, size: int
) -> None:
    with pytest.raises(RangeNotSatisfiable) as refused:
        ByteRange(first, last).resolve(size)
    assert refused.value.size == size


@pytest.mark.parametrize(
    ("current", "target", "path"),
    [
        (RunState.RUNNING, RunState.RUNNING, []),
        (RunState.RUNNING, RunState.PAUSED, [RunState.PAUSED]),
        (RunState.PAUSED, RunState.SUCCEEDED, [RunState.RUNNING, RunState.SUCCEEDED]),
        (RunState.RUNNING, RunState.CANCELLED, [RunState.CANCELLING, RunState.CANCELLED]),
        (RunState.PAUSED, RunState.CANCELLED, [RunState.CANCELLING, RunState.CANCELLED]),
        (RunState.CANCELLING, RunState.FAILED, None),
        (RunState.SUCCEEDED, RunState.RUNNING, None),
    ],
)
def test_terminal_bookkeeping_finds_the_legal_path_between_states(
    current: RunState, target: RunState, path: list[RunState] | None
) -> None:
    assert path_to(current, target) == path


def _command(command_type: RunCommandType, payload: dict[str, object] | None = None) -> RunCommand:
    return RunCommand(
        workspace_id="ws",
        run_id="run",
        command_id="cmd-1",
        type=command_type,
        payload=payload or {},
        created_at=NOW,
        updated_at=NOW,
    )


def test_stored_commands_become_engine_commands_with_their_payload() -> None:
    assert engine_command(_command(RunCommandType.PAUSE)) == PauseRun("cmd-1")
    assert engine_command(_command(RunCommandType.RESUME)) == ResumeRun("cmd-1")
    assert engine_command(_command(RunCommandType.CANCEL, {"reason": "typo"})) == CancelRun("cmd-1", "typo")
    assert engine_command(_command(RunCommandType.CANCEL)) == CancelRun("cmd-1", None)
    assert engine_command(_command(RunCommandType.CHANGE_CONCURRENCY, {"target": 7})) == ChangeConcurrency(
        "cmd-1", 7
    )
    with pytest.raises(ValueError, match="integer target"):
        engine_command(_command(RunCommandType.CHANGE_CONCURRENCY, {"target": "7"}))


def test_an_acknowledgement_message_names_the_code_and_the_allowed_range() -> None:
    assert ack_message(CommandResult("c", True, "ACCEPTED")) is None
    refused = CommandResult("c", False, "CONCURRENCY_OUT_OF_RANGE", "target must lie within [1, 10]", (1, 10))
    assert ack_message(refused) == (
        "CONCURRENCY_OUT_OF_RANGE: target must lie within [1, 10] (allowed range 1..10)"
    )


@pytest.mark.parametrize(
    ("run_id", "snapshot_id", "sequence"),
    [("run-1", "snap-1", 1), ("01a232d7-ca82-7736-92fa-9cf2bfb9fb92", "x" * 64, 10**12), ("中", "é", 0)],
)
def test_item_ids_are_rfc4122_name_based_uuids_of_run_snapshot_and_sequence(
    run_id: str, snapshot_id: str, sequence: int
) -> None:
    namespace = uuid.UUID("0b6c4f35-5b7e-4f4e-9a57-6d2f5e0c9a11")
    expected = str(uuid.uuid5(namespace, f"{run_id}/{snapshot_id}/{sequence}"))
    assert item_id_for(run_id, snapshot_id, sequence) == expected
