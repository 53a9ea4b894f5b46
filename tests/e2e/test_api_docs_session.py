"""The curl session in docs/api.md, run as written against a real `wepush serve`.

The session is the issue's acceptance path and what a user copies first, so it must keep working word for
word. Each ``# …`` line right under a command is the output the document promises; this test runs the
block in bash (with `set -euo pipefail`, so a failing curl -f or jq stops it) and compares every such
output. An ``…`` in a promised line stands for any text (a timestamp, say).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers_process import running_service

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "api.md"
SECTION = "## A session with curl"
DOCUMENTED_BASE = "http://127.0.0.1:18990"
MARKER = "@@wepush-doc-step@@"


@dataclass
class Step:
    code: list[str] = field(default_factory=list)
    promised: list[str] = field(default_factory=list)


def session_block(text: str) -> list[str]:
    section = text.split(SECTION, 1)[1]
    match = re.search(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert match, f"{SECTION} has no bash block"
    return match.group(1).splitlines()


def split_steps(lines: list[str]) -> list[Step]:
    """A comment right under code (no blank line between) is that code's promised output; a comment
    after a blank line introduces what follows and is not run."""
    steps = [Step()]
    previous = "blank"
    for line in lines:
        if not line.strip():
            previous = "blank"
        elif line.startswith("#") and previous in {"code", "output"}:
            steps[-1].promised.append(line.removeprefix("#").removeprefix(" "))
            previous = "output"
        elif line.startswith("#"):
            previous = "description"
        else:
            if steps[-1].promised:
                steps.append(Step())
            steps[-1].code.append(line)
            previous = "code"
    return steps


def script(steps: list[Step], base_url: str) -> str:
    body = ["set -euo pipefail"]
    for step in steps:
        body.extend(step.code)
        body.append(f"echo {MARKER}")
    text = "\n".join(body) + "\n"
    assert text.count(DOCUMENTED_BASE) == 1, "the session names the Service's address once, in B="
    return text.replace(DOCUMENTED_BASE, base_url)


def matches(promised: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in promised.split("…"))
    return re.fullmatch(pattern, actual) is not None


def jq_on_path(bin_dir: Path) -> None:
    bin_dir.mkdir()
    jq = bin_dir / "jq"
    jq.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "e2e" / "_jq.py"}" "$@"\n')
    jq.chmod(0o755)


def test_the_session_splits_into_commands_and_their_promised_output() -> None:
    steps = split_steps(["# intro", "A=$(x)", "echo $A", "# out 1", "# out 2", "", "# next", "echo b", "# b"])
    assert [(s.code, s.promised) for s in steps] == [
        (["A=$(x)", "echo $A"], ["out 1", "out 2"]),
        (["echo b"], ["b"]),
    ]
    assert matches('{"at":"…"}', '{"at":"2026-12-06T13:00:00Z"}')
    assert not matches('{"at":"…"}', '{"at":"x"} extra')


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_the_documented_curl_session_runs_as_written(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    curl = shutil.which("curl")
    assert curl, "the documented session needs curl on PATH"
    steps = split_steps(session_block(DOC.read_text(encoding="utf-8")))
    assert sum(len(step.promised) for step in steps) >= 10, "the session promises its outputs"
    env: dict[str, str] = {}
    if database == "postgresql":
        env = {
            "WEPUSH_DATABASE_TYPE": "postgresql",
            "WEPUSH_DATABASE_URL": request.getfixturevalue("postgres_url"),
        }
    jq_on_path(tmp_path / "bin")
    # The document's paths are relative to the checkout `make run` serves from.
    (tmp_path / ".wepush-dev").mkdir()
    with running_service(tmp_path / ".wepush-dev" / "data", extra_env=env) as service:
        finished = subprocess.run(
            ["bash", "-c", script(steps, service.base_url)],
            cwd=tmp_path,
            env={**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    outputs = finished.stdout.split(MARKER + "\n")
    assert finished.returncode == 0, (
        f"the session stopped after {len(outputs) - 1} of {len(steps)} steps:\n{finished.stderr}"
    )
    for step, output in zip(steps, outputs, strict=False):
        # A terminal shows nothing for a byte-order mark (the error CSV starts with one, for Excel).
        actual = output.removeprefix("\ufeff").splitlines()
        assert len(actual) == len(step.promised), (step.code, actual)
        for promised, line in zip(step.promised, actual, strict=True):
            assert matches(promised, line), (step.code[-1], promised, line)
    assert len(outputs) == len(steps) + 1
    assert outputs[-1] == "", "the session printed something after its last promised output"
