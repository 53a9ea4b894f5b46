"""A start refused inside the lifespan (after preflight, with uvicorn already running) ends as every other
refusal does: one ``wepush serve: cannot start: …`` line on standard error, exit 3, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers_process import running_service, serve_to_exit
from wepush.server.infra.db import upgrade_database
from wepush.server.infra.secrets import MasterKeyRing

NAME = "embedded@qa-host"


def _events(stderr: str) -> list[tuple[str, str]]:
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [(r["level"], r["event"]) for r in records if r["event"]]


def _refusals(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("wepush serve: cannot start: ")]


def test_an_agent_name_a_live_instance_holds_is_one_line_and_exit_3(
    tmp_path: Path, s3_env: dict[str, str]
) -> None:
    database = tmp_path / "shared.db"
    upgrade_database(f"sqlite+aiosqlite:///{database}")  # server mode: `wepush migrate` ran
    key_file = tmp_path / "master.key"
    MasterKeyRing.create_standalone(key_file)  # server mode: `wepush secrets init` ran
    env = {
        **s3_env,
        "WEPUSH_MODE": "server",
        "WEPUSH_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
        "WEPUSH_SECRETS_MASTER_KEY_FILE": str(key_file),
        "WEPUSH_AGENT_EMBEDDED_NAME": NAME,
    }
    with running_service(tmp_path / "first", extra_env=env):
        second = serve_to_exit(tmp_path / "second", extra_env=env)

    assert second.returncode == 3, second.stderr
    [refusal] = _refusals(second.stderr)
    assert refusal.startswith(
        f"wepush serve: cannot start: the embedded agent name {NAME!r} is in use by another live instance "
        "(heartbeat "
    )
    assert refusal.endswith("give each instance its own agent.embedded.name / WEPUSH_AGENT_EMBEDDED_NAME")
    # The event an operator's alerting watches is kept; the 40-line Starlette traceback is gone.
    assert ("ERROR", "AGENT_NAME_IN_USE") in _events(second.stderr)
    assert "Traceback" not in second.stderr


def test_a_refusal_met_in_the_lifespan_is_one_line_and_exit_3(tmp_path: Path) -> None:
    # A directory where the bootstrap token file goes: found only when the first start writes the token.
    blocked = tmp_path / "token-here"
    blocked.mkdir()

    started = serve_to_exit(
        tmp_path / "data", extra_env={"WEPUSH_SECURITY_BOOTSTRAP_TOKEN_FILE": str(blocked)}
    )

    assert started.returncode == 3, started.stderr
    assert _refusals(started.stderr) == [
        f"wepush serve: cannot start: cannot write the bootstrap token file {blocked}: Is a directory"
    ]
    assert "Traceback" not in started.stderr
