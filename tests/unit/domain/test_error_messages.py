"""Domain error messages speak the API's language: what a caller sees in a problem's detail."""

from __future__ import annotations

from wepush.server.domain import RunCommandType, RunState, RunStateConflict


def test_a_refused_run_command_is_named_as_the_api_spells_it() -> None:
    refused = RunStateConflict("run-1", RunState.CANCELLED, "change_concurrency", [RunCommandType.CANCEL])

    assert str(refused) == "Run cannot change-concurrency from CANCELLED"
