"""docs/api.md tells integrators which status each stable problem code comes with; it must say what the
Service sends, and name every code the contract defines."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import yaml

from wepush.server.api._problems import CODES

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\s*\| (\d{3}) \| (.+) \|\s*$")


def _documented() -> dict[int, set[str]]:
    table: dict[int, set[str]] = {}
    for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            table[int(match.group(1))] = set(re.findall(r"`([A-Z_]+)`", match.group(2)))
    return table


def test_the_codes_table_matches_the_status_the_service_sends_for_each_code() -> None:
    sent: dict[int, set[str]] = defaultdict(set)
    for code, (status, _title) in CODES.items():
        sent[status].add(code)
    assert _documented() == dict(sent)


def test_every_code_of_the_contract_is_documented() -> None:
    problem = yaml.safe_load((ROOT / "contracts" / "openapi" / "schemas" / "problem.yaml").read_text())
    documented = set().union(*_documented().values())
    assert set(problem["ProblemCode"]["enum"]) == documented
